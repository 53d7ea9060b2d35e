package main

import (
	"crypto/sha256"
	"encoding/binary"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"

	"github.com/cespare/xxhash/v2"

	"github.com/prefixd/prefixd/disktier"
	"github.com/prefixd/prefixd/eviction"
	"github.com/prefixd/prefixd/kvevents"
	"github.com/prefixd/prefixd/model"
)

// diskTierOptions are the flags of the disk cache tier.
type diskTierOptions struct {
	dir   string
	bytes byteSize
}

func (d *diskTierOptions) register(fs *flag.FlagSet) {
	fs.StringVar(&d.dir, "disk-tier-dir", "", "directory of the disk cache tier: blocks leaving host memory (or the device, without --host-tier-bytes) are written there and survive restarts; a clean stop writes the whole cache; empty: off")
	fs.Var(&d.bytes, "disk-tier-bytes", "with --disk-tier-dir: most bytes of records on disk, e.g. 20GiB")
}

func (d *diskTierOptions) check() error {
	switch {
	case d.dir == "" && d.bytes != 0:
		return usagef("--disk-tier-bytes needs --disk-tier-dir")
	case d.dir != "" && d.bytes <= 0:
		return usagef("--disk-tier-dir needs --disk-tier-bytes, e.g. 20GiB")
	}
	return nil
}

// start opens the disk tier, if configured, for a model whose K/V blocks
// take blockBytes; events, if not nil, hears of its records. Its start-up
// scan runs in the background.
func (d *diskTierOptions) start(o *serveOptions, m *model.Model, blockBytes int64, events *kvevents.Publisher, log *slog.Logger) (*disktier.Tier, error) {
	if d.dir == "" {
		return nil, nil
	}
	var obs eviction.Observer
	if events != nil {
		obs = events
	}
	fp, err := modelFingerprint(o, m, blockBytes)
	if err != nil {
		return nil, fmt.Errorf("disk tier: %w", err)
	}
	t, err := disktier.New(disktier.Config{Dir: d.dir, CapacityBytes: int64(d.bytes), Model: fp, Observer: obs,
		Log: log.With("component", "disk-tier")})
	if err != nil {
		return nil, err
	}
	log.Info("disk tier", "dir", d.dir, "bytes", int64(d.bytes), "model_fingerprint", fmt.Sprintf("%x", fp[:8]))
	return t, nil
}

// modelFingerprint is what the disk tier's records are written under:
// everything that makes a block's K/V bytes mean what they mean. The
// weights file's bytes (tensor names, shapes, types and contents) and the
// tokenizer file's are hashed whole; the built-in model by its name and
// configuration. Then the K/V layout: the device, its element types, the
// block size and the bytes of one block; and the block fingerprint's hash
// and the host's byte order, which the chain hashes tokens in.
func modelFingerprint(o *serveOptions, m *model.Model, blockBytes int64) (disktier.ModelFingerprint, error) {
	h := sha256.New()
	fmt.Fprintf(h, "prefixd disk tier\x00model %q %+v\x00", m.Name, m.Config)
	for _, path := range []string{o.modelPath, o.tokenizerPath} {
		sum, err := fileHash(path)
		if err != nil {
			return disktier.ModelFingerprint{}, err
		}
		fmt.Fprintf(h, "file %x\x00", sum)
	}
	fmt.Fprintf(h, "device %s kv %s dtype %s block %d bytes %d\x00", o.device.device, o.device.kvType.String(), o.device.dtype, o.blockSize, blockBytes)
	fmt.Fprintf(h, "fingerprint xxhash64x2-chain order %s\x00", binary.NativeEndian)
	var fp disktier.ModelFingerprint
	h.Sum(fp[:0])
	return fp, nil
}

// fileHash is the xxhash64 of a file's bytes, 0 for no file.
func fileHash(path string) (uint64, error) {
	if path == "" {
		return 0, nil
	}
	f, err := os.Open(path)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	d := xxhash.New()
	if _, err := io.Copy(d, f); err != nil {
		return 0, err
	}
	return d.Sum64(), nil
}
