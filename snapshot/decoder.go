package snapshot

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"

	"github.com/cellserver/cellserver/engine"
)

// readChunk bounds each read of a long field, so that a corrupt length can
// only make the decoder allocate as much as the input actually holds.
const readChunk = 1 << 20

// Decoder reads one snapshot from an io.Reader as a stream, one block in
// memory at a time. Every block is checked against its own CRC-32C before
// any of its records is returned, and the whole input against the
// trailer's checksum before Next reports io.EOF; a caller that must not act
// on a partial snapshot collects what Next returns and acts only after
// io.EOF (Load does this). A Decoder is not safe for concurrent use.
type Decoder struct {
	r      *bufio.Reader
	hdr    Header
	off    int64  // bytes consumed
	crc    uint32 // CRC-32C of every byte consumed except the trailer's checksum
	buf    []byte // current block (reused unless keep)
	parser recordParser
	left   uint32 // records not yet returned from the current block
	keys   uint64 // records returned
	err    error  // sticky: io.EOF after a verified trailer, or the first failure

	keep    bool     // keep every block payload (Load replays them)
	kept    [][]byte // the payloads, in order
	logBuf  []engine.LogEntry
	scratch [16]byte
}

// NewDecoder reads and checks the header (magic, version, its own
// checksum) from r and returns a Decoder for the records. A truncated or
// corrupt header returns a *CorruptError, a newer format version an error
// matching ErrVersion.
func NewDecoder(r io.Reader) (*Decoder, error) {
	d := &Decoder{r: bufio.NewReaderSize(r, 64<<10)}
	if err := d.readHeader(); err != nil {
		return nil, err
	}
	return d, nil
}

// Header returns the snapshot's header. Meta is owned by the Decoder's
// caller from then on.
func (d *Decoder) Header() Header { return d.hdr }

// Count returns the number of records Next has returned; after Next
// reported io.EOF it equals the key count in the trailer.
func (d *Decoder) Count() uint64 { return d.keys }

// Offset returns the number of bytes consumed from the input so far.
func (d *Decoder) Offset() int64 { return d.off }

// read reads n bytes into dst[:0] (growing it as data arrives) and returns
// them; with sum, they are added to the running file checksum.
func (d *Decoder) read(dst []byte, n int, what string, sum bool) ([]byte, error) {
	start := d.off
	dst = dst[:0]
	for len(dst) < n {
		chunk := min(n-len(dst), readChunk)
		if cap(dst)-len(dst) < chunk {
			grown := make([]byte, len(dst), max(len(dst)+chunk, min(n, 2*cap(dst))))
			copy(grown, dst)
			dst = grown
		}
		m, err := io.ReadFull(d.r, dst[len(dst):len(dst)+chunk])
		if sum {
			d.crc = crc32.Update(d.crc, castagnoli, dst[len(dst):len(dst)+m])
		}
		d.off += int64(m)
		dst = dst[:len(dst)+m]
		if err != nil {
			if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
				return nil, &CorruptError{Offset: d.off, Truncated: true,
					What: fmt.Sprintf("input ends inside the %s that starts at offset %d (%d of %d bytes)", what, start, len(dst), n)}
			}
			return nil, fmt.Errorf("snapshot: read %s at offset %d: %w", what, d.off, err)
		}
	}
	return dst, nil
}

func (d *Decoder) readHeader() error {
	b, err := d.read(make([]byte, 0, headerFixedLen), headerFixedLen, "header", true)
	if err != nil {
		return err
	}
	if string(b[:8]) != Magic {
		return corruptf(0, "bad magic %q: not a cellserver snapshot", b[:8])
	}
	v := binary.LittleEndian.Uint32(b[8:])
	if v == 0 {
		return corruptf(8, "format version 0")
	}
	if v > Version {
		return fmt.Errorf("snapshot: format version %d, this build reads versions 1..%d: %w", v, Version, ErrVersion)
	}
	if f := binary.LittleEndian.Uint32(b[12:]); f != 0 {
		return corruptf(12, "unknown header flags 0x%x", f)
	}
	d.hdr.Version = v
	d.hdr.Created = int64(binary.LittleEndian.Uint64(b[16:]))
	shards := binary.LittleEndian.Uint32(b[24:])
	if shards > MaxShards {
		return corruptf(24, "shard count %d exceeds %d", shards, MaxShards)
	}
	d.hdr.Shards = int(shards)
	metaLen := binary.LittleEndian.Uint32(b[28:])
	if metaLen > MaxMetaLen {
		return corruptf(28, "metadata length %d exceeds %d", metaLen, MaxMetaLen)
	}
	if metaLen > 0 {
		if d.hdr.Meta, err = d.read(nil, int(metaLen), "metadata", true); err != nil {
			return err
		}
	}
	want := d.crc
	sumOff := d.off
	c, err := d.read(d.scratch[:0], crcLen, "header checksum", true)
	if err != nil {
		return err
	}
	if got := binary.LittleEndian.Uint32(c); got != want {
		return corruptf(sumOff, "header checksum mismatch (stored 0x%08x, computed 0x%08x)", got, want)
	}
	d.parser.created = d.hdr.Created
	return nil
}

// Next returns the next record: its key, which stays valid only until the
// next call to Next, and its state, whose Log is freshly allocated and owned
// by the caller. After the last record it checks the trailer and returns
// io.EOF; any other error (a *CorruptError for bad input) is returned for
// this and every later call.
func (d *Decoder) Next() ([]byte, engine.State, error) {
	for d.err == nil && d.left == 0 {
		d.err = d.nextBlock()
	}
	if d.err != nil {
		return nil, engine.State{}, d.err
	}
	var logBuf []engine.LogEntry
	if d.keep {
		// Load validates on this pass and decodes again when installing:
		// reuse one log buffer here.
		if d.logBuf == nil {
			d.logBuf = make([]engine.LogEntry, 0, 16)
		}
		logBuf = d.logBuf
	}
	key, st, logBuf, err := d.parser.next(logBuf)
	if err != nil {
		d.err = err
		return nil, engine.State{}, err
	}
	d.logBuf = logBuf
	d.left--
	d.keys++
	if d.left == 0 && d.parser.pos != len(d.parser.buf) {
		d.err = corruptf(d.parser.base+int64(d.parser.pos), "%d stray bytes after the block's last record", len(d.parser.buf)-d.parser.pos)
		return nil, engine.State{}, d.err
	}
	return key, st, nil
}

// nextBlock reads the next block (verifying its checksum) or the trailer
// (verifying the file checksum and key count, then io.EOF).
func (d *Decoder) nextBlock() error {
	tagOff := d.off
	t, err := d.read(d.scratch[:0], 1, "block tag", true)
	if err != nil {
		var ce *CorruptError
		if errors.As(err, &ce) {
			ce.What = "input ends before the trailer"
		}
		return err
	}
	switch t[0] {
	case tagBlock:
		return d.readBlock(tagOff)
	case tagTrailer:
		return d.readTrailer(tagOff)
	}
	return corruptf(tagOff, "unknown block tag 0x%02x", t[0])
}

func (d *Decoder) readBlock(tagOff int64) error {
	h, err := d.read(d.scratch[1:1], blockHeadLen-1, "block header", true)
	if err != nil {
		return err
	}
	size := binary.LittleEndian.Uint32(h)
	count := binary.LittleEndian.Uint32(h[4:])
	// Every record takes at least 7 bytes (key length, kind, mode, four
	// one-byte varints).
	if size == 0 || size > MaxBlockLen {
		return corruptf(tagOff+1, "block length %d outside 1..%d", size, MaxBlockLen)
	}
	if count == 0 || count > size/7 {
		return corruptf(tagOff+5, "block record count %d impossible for %d bytes", count, size)
	}
	sum := crc32.Update(0, castagnoli, []byte{tagBlock})
	sum = crc32.Update(sum, castagnoli, h)
	payOff := d.off
	dst := d.buf
	if d.keep {
		dst = nil
	}
	p, err := d.read(dst, int(size), "block payload", true)
	if err != nil {
		return err
	}
	sum = crc32.Update(sum, castagnoli, p)
	sumOff := d.off
	c, err := d.read(d.scratch[:0], crcLen, "block checksum", true)
	if err != nil {
		return err
	}
	if got := binary.LittleEndian.Uint32(c); got != sum {
		return corruptf(sumOff, "checksum mismatch in the block at offset %d (stored 0x%08x, computed 0x%08x)", tagOff, got, sum)
	}
	if d.keep {
		d.kept = append(d.kept, p)
	} else {
		d.buf = p
	}
	d.parser.buf, d.parser.pos, d.parser.base = p, 0, payOff
	d.left = count
	return nil
}

func (d *Decoder) readTrailer(tagOff int64) error {
	k, err := d.read(d.scratch[1:1], 8, "trailer", true)
	if err != nil {
		return err
	}
	keys := binary.LittleEndian.Uint64(k)
	want := d.crc
	sumOff := d.off
	c, err := d.read(d.scratch[:0], crcLen, "trailer checksum", false)
	if err != nil {
		return err
	}
	if got := binary.LittleEndian.Uint32(c); got != want {
		return corruptf(sumOff, "file checksum mismatch (stored 0x%08x, computed 0x%08x)", got, want)
	}
	if keys != d.keys {
		return corruptf(tagOff+1, "trailer counts %d keys, the blocks hold %d", keys, d.keys)
	}
	if _, err := d.r.ReadByte(); err == nil {
		return corruptf(d.off, "data after the trailer")
	} else if !errors.Is(err, io.EOF) {
		return fmt.Errorf("snapshot: read after trailer at offset %d: %w", d.off, err)
	}
	return io.EOF
}
