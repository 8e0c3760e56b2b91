package snapshot

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"io"

	"github.com/cellserver/cellserver/engine"
)

// Encoder writes one snapshot to an io.Writer as a stream: it holds at most
// one block (about 64 KiB, or one record when a record is larger) in memory.
// It writes the header in NewEncoder, a block whenever one fills, and the
// final block and trailer in Close. An Encoder is not safe for concurrent
// use. After any write error every later call returns that error.
type Encoder struct {
	w       io.Writer
	created int64
	crc     uint32 // CRC-32C of every byte written so far
	off     int64  // bytes written so far
	block   []byte // block head (reserved) + payload being filled
	inBlock uint32 // records in block
	keys    uint64 // records encoded
	err     error
	closed  bool
}

// NewEncoder writes the header of a snapshot described by hdr to w and
// returns an Encoder for its records. hdr.Version is ignored (Version is
// written); hdr.Shards must be in 0..MaxShards and hdr.Meta at most
// MaxMetaLen bytes.
func NewEncoder(w io.Writer, hdr Header) (*Encoder, error) {
	if hdr.Shards < 0 || hdr.Shards > MaxShards {
		return nil, fmt.Errorf("snapshot: shard count %d outside 0..%d", hdr.Shards, MaxShards)
	}
	if len(hdr.Meta) > MaxMetaLen {
		return nil, fmt.Errorf("snapshot: metadata of %d bytes exceeds %d", len(hdr.Meta), MaxMetaLen)
	}
	e := &Encoder{w: w, created: hdr.Created, block: make([]byte, blockHeadLen, blockTarget+blockHeadLen+crcLen+1024)}
	b := make([]byte, 0, headerFixedLen+len(hdr.Meta)+crcLen)
	b = append(b, Magic...)
	b = binary.LittleEndian.AppendUint32(b, Version)
	b = binary.LittleEndian.AppendUint32(b, 0) // flags: none defined in version 1
	b = binary.LittleEndian.AppendUint64(b, uint64(hdr.Created))
	b = binary.LittleEndian.AppendUint32(b, uint32(hdr.Shards))
	b = binary.LittleEndian.AppendUint32(b, uint32(len(hdr.Meta)))
	b = append(b, hdr.Meta...)
	b = binary.LittleEndian.AppendUint32(b, crc32.Checksum(b, castagnoli))
	if err := e.write(b); err != nil {
		return nil, err
	}
	return e, nil
}

func (e *Encoder) write(b []byte) error {
	if e.err != nil {
		return e.err
	}
	n, err := e.w.Write(b)
	e.crc = crc32.Update(e.crc, castagnoli, b[:n])
	e.off += int64(n)
	if err == nil && n < len(b) {
		err = io.ErrShortWrite
	}
	if err != nil {
		e.err = fmt.Errorf("snapshot: write at offset %d: %w", e.off, err)
	}
	return e.err
}

// Encode appends one record: key (0..MaxKeyLen bytes; copied) and its state,
// which must pass ValidateState. An invalid record returns an error and
// writes nothing; the encoder stays usable.
func (e *Encoder) Encode(key []byte, st *engine.State) error {
	if e.err != nil {
		return e.err
	}
	if e.closed {
		return ErrClosed
	}
	if len(key) > MaxKeyLen {
		return fmt.Errorf("snapshot: key of %d bytes exceeds %d", len(key), MaxKeyLen)
	}
	if err := ValidateState(st); err != nil {
		return fmt.Errorf("snapshot: key %q: %w", truncKey(key), err)
	}
	mark := len(e.block)
	e.block = appendRecord(e.block, e.created, key, st)
	if size := len(e.block) - blockHeadLen; size > MaxBlockLen {
		rec := len(e.block) - mark
		if rec > MaxBlockLen {
			e.block = e.block[:mark]
			return fmt.Errorf("snapshot: key %q: record of %d bytes exceeds %d", truncKey(key), rec, MaxBlockLen)
		}
		// Close the block without this record, then start the next with it.
		tail := append([]byte(nil), e.block[mark:]...)
		e.block = e.block[:mark]
		if err := e.flush(); err != nil {
			return err
		}
		e.block = append(e.block, tail...)
	}
	e.inBlock++
	e.keys++
	if len(e.block)-blockHeadLen >= blockTarget {
		return e.flush()
	}
	return nil
}

// flush writes the block being filled, if it holds any record.
func (e *Encoder) flush() error {
	if e.inBlock == 0 {
		return e.err
	}
	b := e.block
	b[0] = tagBlock
	binary.LittleEndian.PutUint32(b[1:], uint32(len(b)-blockHeadLen))
	binary.LittleEndian.PutUint32(b[5:], e.inBlock)
	b = binary.LittleEndian.AppendUint32(b, crc32.Checksum(b, castagnoli))
	err := e.write(b)
	e.block, e.inBlock = b[:blockHeadLen], 0
	return err
}

// Close writes the last block and the trailer (key count and the CRC-32C
// of everything before the checksum). It does not close the underlying
// writer. Calling Close again returns the first call's result.
func (e *Encoder) Close() error {
	if e.closed {
		return e.err
	}
	e.closed = true
	if err := e.flush(); err != nil {
		return err
	}
	b := make([]byte, 0, trailerLen)
	b = append(b, tagTrailer)
	b = binary.LittleEndian.AppendUint64(b, e.keys)
	sum := crc32.Update(e.crc, castagnoli, b)
	b = binary.LittleEndian.AppendUint32(b, sum)
	return e.write(b)
}

// Count returns the number of records encoded so far.
func (e *Encoder) Count() uint64 { return e.keys }

// Size returns the number of bytes written to the underlying writer so far
// (the whole snapshot's size after Close).
func (e *Encoder) Size() int64 { return e.off }
