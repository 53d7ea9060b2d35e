package disktier

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/prefixd/prefixd/kvcache"
)

// scanDir indexes the records already in the directory, as the least
// recently used (their order on disk says nothing of their use), and
// removes temporary files other processes left (a writer killed between
// write and rename). It runs once, in the background; the tier serves
// meanwhile. Records of another model are skipped, not removed: another
// process may own them.
func (t *Tier) scanDir() {
	defer t.scan.Store(false)
	top, err := os.ReadDir(t.cfg.Dir)
	if err != nil {
		t.cfg.Log.Warn("disk tier: scan", "err", err)
		return
	}
	indexed, foreign := 0, 0
	for _, d := range top {
		name := d.Name()
		if strings.HasPrefix(name, ".tmp-") {
			if !strings.HasPrefix(name, t.pid) {
				os.Remove(filepath.Join(t.cfg.Dir, name))
			}
			continue
		}
		if !d.IsDir() || len(name) != 2 {
			continue
		}
		files, err := os.ReadDir(filepath.Join(t.cfg.Dir, name))
		if err != nil {
			continue
		}
		for _, f := range files {
			select {
			case <-t.queue.Stop():
				return
			default:
			}
			if !strings.HasSuffix(f.Name(), ".kv") {
				continue
			}
			switch t.scanFile(filepath.Join(t.cfg.Dir, name, f.Name())) {
			case scanIndexed:
				indexed++
			case scanForeign:
				foreign++
			}
		}
	}
	t.wmu.Lock()
	t.keepBudget(t.now()) // the directory may hold more than this run's budget
	t.wmu.Unlock()
	t.cfg.Log.Info("disk tier: index rebuilt", "records", indexed, "other_models", foreign, "bytes", t.Bytes())
}

type scanResult int

const (
	scanIndexed scanResult = iota
	scanForeign
	scanSkipped
)

// scanFile indexes one record from its header, the namespace and token
// IDs (checked by the header's CRC), and its length; its K/V bytes and the
// whole record's CRC are checked when it is read.
func (t *Tier) scanFile(path string) scanResult {
	f, err := os.Open(path)
	if err != nil {
		return scanSkipped
	}
	defer f.Close()
	hb := make([]byte, headerSize)
	_, err = io.ReadFull(f, hb)
	var h header
	if err == nil {
		h, err = parseHeader(hb)
	}
	if err == nil && h.model != t.cfg.Model {
		return scanForeign
	}
	var fi os.FileInfo
	if err == nil {
		vb := make([]byte, h.varSize())
		if _, err = io.ReadFull(f, vb); err == nil {
			if err = h.parseVar(hb, vb); err == nil {
				fi, err = f.Stat()
			}
		}
	}
	if err == nil && fi.Size() != int64(h.totalSize()) {
		err = fmt.Errorf("%w: %d bytes, the header says %d", ErrCorrupt, fi.Size(), h.totalSize())
	}
	if err == nil && path != t.path(h.fp) {
		err = fmt.Errorf("%w: the record of another fingerprint", ErrCorrupt)
	}
	if err != nil {
		if err == io.ErrUnexpectedEOF || err == io.EOF {
			err = fmt.Errorf("%w: torn: %v", ErrCorrupt, err)
		}
		t.discard(path, h.fp, err)
		return scanSkipped
	}
	e := &entry{fp: h.fp, parent: h.parent, ns: h.ns, tokens: h.tokens, expiry: t.expiry(h.expires, h.lastUsed), size: fi.Size()}
	if e.expiry <= t.now() {
		os.Remove(path)
		return scanSkipped
	}
	if !t.index.insertOld(e) {
		return scanSkipped
	}
	if t.cfg.Observer != nil {
		t.cfg.Observer.TierStored(kvcache.TierDisk, e.ns, e.parent, e.fp, e.tokens)
	}
	return scanIndexed
}
