package cpu

import (
	"encoding/binary"
	"errors"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/prefixd/prefixd/blockstore"
	"github.com/prefixd/prefixd/kernels"
	"github.com/prefixd/prefixd/kernels/quant"
)

// fillCache Puts distinct random K/V into every slot of every block.
func fillCache(t *testing.T, cfg KVConfig) *KVCache {
	t.Helper()
	c, err := NewKVCache(cfg)
	if err != nil {
		t.Fatal(err)
	}
	r := rand.New(rand.NewPCG(13, 14))
	kvd := cfg.KVHeads * cfg.HeadDim
	for l := range cfg.Layers {
		for b := range cfg.NumBlocks {
			for s := range cfg.BlockSize {
				c.Put(l, blockstore.BlockID(b), s, randVec(r, kvd), randVec(r, kvd))
			}
		}
	}
	return c
}

func readBlock(t *testing.T, c *KVCache, id blockstore.BlockID) []byte {
	t.Helper()
	buf := make([]byte, c.BlockBytes())
	if err := c.ReadBlock(id, buf); err != nil {
		t.Fatal(err)
	}
	return buf
}

// checkSlots fails unless the first slots slots of block dst equal those of
// want (a ReadBlock image) in every layer, K and V, and the rest equal
// rest (another image).
func checkSlots(t *testing.T, c *KVCache, dst blockstore.BlockID, want, rest []byte, slots int) {
	t.Helper()
	got := readBlock(t, c, dst)
	slotBytes := c.cfg.KVHeads * c.cfg.HeadDim * c.elemBytes()
	half := c.cfg.BlockSize * slotBytes // one layer's K (or V) of a block
	for off := 0; off < len(got); off += half {
		for s := range c.cfg.BlockSize {
			lo, hi := off+s*slotBytes, off+(s+1)*slotBytes
			src := rest
			if s < slots {
				src = want
			}
			if string(got[lo:hi]) != string(src[lo:hi]) {
				t.Fatalf("block %d: slot %d at byte %d differs", dst, s, off)
			}
		}
	}
}

func TestKVCacheLayout(t *testing.T) {
	cfg := KVConfig{Layers: 2, KVHeads: 2, HeadDim: 3, BlockSize: 4, NumBlocks: 5}
	c, err := NewKVCache(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if want := 2 * 2 * 4 * 2 * 3 * 4; c.BlockBytes() != want {
		t.Fatalf("BlockBytes = %d, want %d", c.BlockBytes(), want)
	}
	k := []float32{1, 2, 3, 4, 5, 6}
	v := []float32{-1, -2, -3, -4, -5, -6}
	c.Put(1, 3, 2, k, v)
	buf := readBlock(t, c, 3)
	// Documented layout: layer 1's K follows layer 0's K and V; slot 2
	// starts 2·KVHeads·HeadDim floats in.
	at := func(layer, kv, slot, i int) float32 {
		off := ((layer*2+kv)*cfg.BlockSize*6 + slot*6 + i) * 4
		return math.Float32frombits(binary.LittleEndian.Uint32(buf[off:]))
	}
	for i := range 6 {
		if at(1, 0, 2, i) != k[i] || at(1, 1, 2, i) != v[i] {
			t.Fatalf("float %d: K %v V %v, want %v %v", i, at(1, 0, 2, i), at(1, 1, 2, i), k[i], v[i])
		}
		if at(0, 0, 2, i) != 0 || at(1, 0, 1, i) != 0 {
			t.Fatal("Put wrote outside its layer and slot")
		}
	}
}

// TestKVCacheLayoutF16 checks an F16 cache's block image: ReadBlock's
// layout with 2-byte little-endian halves, each Put value rounded to
// nearest even (values chosen so that every rounding case shows).
func TestKVCacheLayoutF16(t *testing.T) {
	cfg := KVConfig{Layers: 2, KVHeads: 2, HeadDim: 5, BlockSize: 4, NumBlocks: 5, Type: kernels.F16}
	c, err := NewKVCache(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if want := 2 * 2 * 4 * 2 * 5 * 2; c.BlockBytes() != want {
		t.Fatalf("BlockBytes = %d, want %d", c.BlockBytes(), want)
	}
	// 1+2^-11 is halfway between the halves 1 and 1+2^-10 and rounds to
	// the even 1; 1+3·2^-11 rounds up to 1+2^-9 (0x3c02); 70000 is past
	// the largest half (65504) and becomes +Inf; 2^-24 is the smallest
	// subnormal; -2 is exact. Ten values: both heads of one slot.
	k := []float32{1, 1 + 1.0/(1<<11), 1 + 3.0/(1<<11), 70000, 1.0 / (1 << 24), -2, 0.5, 65504, -0.25, 3}
	wantK := []uint16{0x3c00, 0x3c00, 0x3c02, 0x7c00, 0x0001, 0xc000, 0x3800, 0x7bff, 0xb400, 0x4200}
	v := []float32{-1, 2, 0, -70000, 1024, 1.5, -0.5, 4, 8, -8}
	wantV := []uint16{0xbc00, 0x4000, 0x0000, 0xfc00, 0x6400, 0x3e00, 0xb800, 0x4400, 0x4800, 0xc800}
	eachKernel(t, func(t testing.TB) {
		c.Put(1, 3, 2, k, v)
		buf := make([]byte, c.BlockBytes())
		if err := c.ReadBlock(3, buf); err != nil {
			t.Fatal(err)
		}
		at := func(layer, kv, slot, i int) uint16 {
			off := ((layer*2+kv)*cfg.BlockSize*10 + slot*10 + i) * 2
			return binary.LittleEndian.Uint16(buf[off:])
		}
		for i := range 10 {
			if at(1, 0, 2, i) != wantK[i] || at(1, 1, 2, i) != wantV[i] {
				t.Fatalf("value %d: K %#04x V %#04x, want %#04x %#04x", i, at(1, 0, 2, i), at(1, 1, 2, i), wantK[i], wantV[i])
			}
			if at(0, 0, 2, i) != 0 || at(1, 0, 1, i) != 0 || at(1, 1, 3, i) != 0 {
				t.Fatal("Put wrote outside its layer and slot")
			}
		}
	})
}

// kvTypes are the element types a KVCache stores.
var kvTypes = []kernels.DType{kernels.F32, kernels.F16}

func TestKVCacheReadWriteRoundTrip(t *testing.T) {
	for _, typ := range kvTypes {
		t.Run(typ.String(), func(t *testing.T) {
			c := fillCache(t, KVConfig{Layers: 3, KVHeads: 2, HeadDim: 4, BlockSize: 3, NumBlocks: 4, Type: typ})
			img := readBlock(t, c, 1)
			if err := c.WriteBlock(2, img); err != nil {
				t.Fatal(err)
			}
			if string(readBlock(t, c, 2)) != string(img) {
				t.Fatal("block 2 differs from the image written to it")
			}
			if string(readBlock(t, c, 1)) != string(img) {
				t.Fatal("WriteBlock of block 2 changed block 1")
			}
		})
	}
}

// TestKVCachePutReadF16 checks that what Put stores in an F16 cache reads
// back, through ReadBlock, as each value rounded to a half, and that a
// block written from that image attends like the original (WriteBlock
// restores the values Attention reads).
func TestKVCachePutReadF16(t *testing.T) {
	cfg := KVConfig{Layers: 2, KVHeads: 2, HeadDim: 12, BlockSize: 4, NumBlocks: 3, Type: kernels.F16}
	kvd := cfg.KVHeads * cfg.HeadDim
	r := rand.New(rand.NewPCG(7, 8))
	eachKernel(t, func(t testing.TB) {
		c, err := NewKVCache(cfg)
		if err != nil {
			t.Fatal(err)
		}
		k, v := randVec(r, cfg.BlockSize*kvd), randVec(r, cfg.BlockSize*kvd)
		for s := range cfg.BlockSize {
			c.Put(1, 2, s, k[s*kvd:(s+1)*kvd], v[s*kvd:(s+1)*kvd])
		}
		buf := make([]byte, c.BlockBytes())
		if err := c.ReadBlock(2, buf); err != nil {
			t.Fatal(err)
		}
		layer1 := buf[len(buf)/2:]
		for i := range k {
			gotK := binary.LittleEndian.Uint16(layer1[2*i:])
			gotV := binary.LittleEndian.Uint16(layer1[2*(len(k)+i):])
			if gotK != quant.F32ToF16(k[i]) || gotV != quant.F32ToF16(v[i]) {
				t.Fatalf("value %d: K %#04x V %#04x, want %#04x %#04x", i, gotK, gotV, quant.F32ToF16(k[i]), quant.F32ToF16(v[i]))
			}
		}
		if err := c.WriteBlock(0, buf); err != nil {
			t.Fatal(err)
		}
		q := randVec(r, cfg.BlockSize*kvd)
		attend := func(id blockstore.BlockID) []float32 {
			out := make([]float32, len(q))
			var scratch AttnScratch
			w := NewWorkers(1)
			defer w.Close()
			c.Attention(w, 1, q, out, []AttnSeq{{Blocks: []blockstore.BlockID{id}, Rows: cfg.BlockSize}}, cfg.KVHeads, &scratch)
			return out
		}
		checkSameBits(t, attend(0), attend(2))
	})
}

// FuzzKVCacheBlock writes arbitrary bytes to a block of either type and
// checks that ReadBlock gives them back unchanged (every bit pattern, NaN
// payloads included, is kept), that the neighbouring blocks keep theirs,
// and that a block copy carries them.
func FuzzKVCacheBlock(f *testing.F) {
	f.Add(false, []byte{1, 2, 3})
	f.Add(true, []byte{0xff, 0x7f, 0x00, 0x7c, 0x01, 0xfe})
	f.Fuzz(func(t *testing.T, half bool, seed []byte) {
		cfg := KVConfig{Layers: 2, KVHeads: 2, HeadDim: 3, BlockSize: 2, NumBlocks: 3}
		if half {
			cfg.Type = kernels.F16
		}
		c, err := NewKVCache(cfg)
		if err != nil {
			t.Fatal(err)
		}
		img := make([]byte, c.BlockBytes())
		for i := range img {
			if len(seed) > 0 {
				img[i] = seed[i%len(seed)] ^ byte(i/len(seed))
			}
		}
		if err := c.WriteBlock(1, img); err != nil {
			t.Fatal(err)
		}
		if got := readBlock(t, c, 1); string(got) != string(img) {
			t.Fatalf("ReadBlock gave %x, want %x", got, img)
		}
		zero := make([]byte, len(img))
		if string(readBlock(t, c, 0)) != string(zero) || string(readBlock(t, c, 2)) != string(zero) {
			t.Fatal("WriteBlock changed another block")
		}
		if err := c.CopyBlocks([]blockstore.BlockCopy{{Src: 1, Dst: 2, Slots: cfg.BlockSize}}); err != nil {
			t.Fatal(err)
		}
		if string(readBlock(t, c, 2)) != string(img) {
			t.Fatal("CopyBlocks did not carry the image")
		}
	})
}

func TestKVCacheCopyBlocks(t *testing.T) {
	for _, typ := range kvTypes {
		t.Run(typ.String(), func(t *testing.T) { testKVCacheCopyBlocks(t, typ) })
	}
}

func testKVCacheCopyBlocks(t *testing.T, typ kernels.DType) {
	cfg := KVConfig{Layers: 2, KVHeads: 1, HeadDim: 8, BlockSize: 4, NumBlocks: 6, Type: typ}
	for _, tc := range []struct {
		name   string
		copies []blockstore.BlockCopy
	}{
		{"whole block", []blockstore.BlockCopy{{Src: 0, Dst: 1, Slots: 4}}},
		{"partial block", []blockstore.BlockCopy{{Src: 2, Dst: 3, Slots: 3}}},
		{"no slots", []blockstore.BlockCopy{{Src: 2, Dst: 3, Slots: 0}}},
		{"batch", []blockstore.BlockCopy{{Src: 0, Dst: 5, Slots: 1}, {Src: 4, Dst: 2, Slots: 2}, {Src: 1, Dst: 3, Slots: 4}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := fillCache(t, cfg)
			before := make([][]byte, cfg.NumBlocks)
			for b := range before {
				before[b] = readBlock(t, c, blockstore.BlockID(b))
			}
			if err := c.CopyBlocks(tc.copies); err != nil {
				t.Fatal(err)
			}
			for _, cp := range tc.copies {
				checkSlots(t, c, cp.Dst, before[cp.Src], before[cp.Dst], cp.Slots)
			}
		})
	}
}

func TestKVCacheErrors(t *testing.T) {
	c := fillCache(t, KVConfig{Layers: 2, KVHeads: 1, HeadDim: 2, BlockSize: 2, NumBlocks: 3})
	buf := make([]byte, c.BlockBytes())
	before := readBlock(t, c, 0)
	for _, tc := range []struct {
		name string
		err  error
		want error
	}{
		{"read past the end", c.ReadBlock(3, buf), ErrBlockRange},
		{"read negative", c.ReadBlock(-1, buf), ErrBlockRange},
		{"read short buffer", c.ReadBlock(0, buf[:3]), ErrBufferSize},
		{"write long buffer", c.WriteBlock(0, append(buf, 0)), ErrBufferSize},
		{"write past the end", c.WriteBlock(7, buf), ErrBlockRange},
		{"copy too many slots", c.CopyBlocks([]blockstore.BlockCopy{{Src: 1, Dst: 0, Slots: 3}}), ErrSlotRange},
		{"copy negative slots", c.CopyBlocks([]blockstore.BlockCopy{{Src: 1, Dst: 0, Slots: -1}}), ErrSlotRange},
		{"copy bad source", c.CopyBlocks([]blockstore.BlockCopy{{Src: 9, Dst: 0, Slots: 1}}), ErrBlockRange},
		{"bad copy after a good one", c.CopyBlocks([]blockstore.BlockCopy{{Src: 1, Dst: 0, Slots: 2}, {Src: 0, Dst: 3, Slots: 1}}), ErrBlockRange},
		{"zero config", errOf(NewKVCache(KVConfig{})), ErrBadConfig},
		{"BF16 elements", errOf(NewKVCache(KVConfig{Layers: 1, KVHeads: 1, HeadDim: 1, BlockSize: 1, NumBlocks: 1, Type: kernels.BF16})), ErrBadConfig},
		{"negative block size", errOf(NewKVCache(KVConfig{Layers: 1, KVHeads: 1, HeadDim: 1, BlockSize: -1, NumBlocks: 1})), ErrBadConfig},
		{"sizes past any memory", errOf(NewKVCache(KVConfig{Layers: 1, KVHeads: 8, HeadDim: 128, BlockSize: 16, NumBlocks: 9_000_000_000_000})), ErrBadConfig},
	} {
		if !errors.Is(tc.err, tc.want) {
			t.Errorf("%s: error %v, want %v", tc.name, tc.err, tc.want)
		}
	}
	if string(readBlock(t, c, 0)) != string(before) {
		t.Fatal("a failed CopyBlocks changed the cache")
	}
}

func errOf(_ *KVCache, err error) error { return err }

func TestKVCachePutPanicsOutOfRange(t *testing.T) {
	c, err := NewKVCache(KVConfig{Layers: 1, KVHeads: 1, HeadDim: 2, BlockSize: 2, NumBlocks: 2})
	if err != nil {
		t.Fatal(err)
	}
	kv := []float32{1, 2}
	for _, tc := range []struct {
		name  string
		layer int
		id    blockstore.BlockID
		slot  int
		k     []float32
	}{
		{"slot past block", 0, 0, 2, kv},
		{"block past cache", 0, 2, 0, kv},
		{"layer past cache", 1, 0, 0, kv},
		{"short vector", 0, 0, 0, kv[:1]},
	} {
		t.Run(tc.name, func(t *testing.T) {
			defer func() {
				if recover() == nil {
					t.Fatal("no panic")
				}
			}()
			c.Put(tc.layer, tc.id, tc.slot, tc.k, kv)
		})
	}
}
