package versionstore

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"log"
	"os"
	"sync"
	"sync/atomic"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"

	"ckptfs/internal/crashpoint"
)

// rangelog.go owns the range log: the file that makes a range record
// (ranges.go) survive a kill -9 without waiting for Pebble's log writer.
//
// Why: a turn of random writes into a big file makes a range record for
// each block it writes first (fio's pass over 256 MiB: 17k of them). A
// synced commit (walsync.go) hands its batch to Pebble's log writer
// goroutine and waits until that goroutine wrote it: two wake-ups, about
// 30 µs a record on a busy 2-core machine, more than the record's read
// and write of its bytes together. A range record's event is instead
// committed with pebble.NoSync (in the memtable at once, so every reader
// sees it; in Pebble's log a moment later) and written to the range log
// by one write(2) on the committing goroutine, before Record returns.
//
// The contract:
//
//   - An entry is the event (seq and value) of a batch committed with
//     NoSync that Pebble's log may not hold yet. Entries are written under
//     rangeLog.mu after their commit, so their order is the commits'.
//   - The log is emptied once a synced write to Pebble's log followed its
//     entries: Pebble's log is written in commit order, so every entry is
//     in it then. A synced commit through Store.commit empties it
//     (holding rangeLog.mu, so that no entry comes between), and so do
//     syncWAL, a log grown past rangeLogMax, and Close.
//   - Every event committed in the open turn that is not a range record
//     goes through a synced Store.commit, so an entry is always newer
//     than every other event; events of the open turn are deleted only
//     by a failed rename (its own, newer than every entry then) and by
//     Recover.
//   - Open, once Pebble replayed its own log and the format is checked,
//     before anything reads events, sets each entry whose seq is above
//     the newest event Pebble holds (replayRangeLog): those are exactly
//     the ones a kill -9 took out of Pebble's log, the newest events. The
//     others are in Pebble already. Then it syncs Pebble's log and
//     empties the range log.
//
// Power loss: the log is never fsynced; an entry is in Pebble's log
// before any sync point makes that log durable (syncWAL writes the
// entries there first). The kernel may write the log's pages out before
// Pebble's log holds their records, so after a power loss the log could
// hold entries past a hole in what Pebble kept: the header names the
// boot it was written in, and Open replays only a log of its own boot
// (a kill -9 keeps the page cache; a reboot may not have). A power loss
// then takes what it would take without the range log: the end of the
// open turn.
//
// A log whose header could not be written (reset failed) is not used
// until a reset succeeds: range records then take the synced commit.
//
// Format: a header (magic, generation, boot id) at offset 0, then
// entries, each a length, a CRC-32C of the rest, the generation, the seq
// and the event's value. Emptying writes a header with the next
// generation and starts again at its end, without truncating: reading
// stops at the first entry whose CRC or generation is not the header's.

// rangeLogName is the range log's file name in the store directory.
const rangeLogName = "range-records"

// rangeLogMax is the size past which appending an entry empties the log
// (after a synced write of Pebble's log): the most the next Open replays.
const rangeLogMax = 8 << 20

const (
	rangeLogMagic  = 0x636b7072 // "ckpr"
	rangeLogBoot   = 36         // a boot id as the kernel writes it
	rangeLogHeader = 4 + 8 + rangeLogBoot
	rangeLogFixed  = 4 + 4 + 8 + 8 // length, crc, generation, seq
)

// rangeLog is the open range log.
type rangeLog struct {
	mu      sync.Mutex
	f       vfs.File
	boot    [rangeLogBoot]byte
	gen     uint64
	end     int64        // where the next entry goes
	pending atomic.Int64 // entries since the log was last emptied
	// usable (under mu): the last reset wrote its header (else the log
	// may hold entries Pebble has, of the generation new ones would get).
	usable bool
}

// bootID names this boot of the machine (zeros where the kernel does
// not tell); tests replace it to stand for a reboot.
var bootID = func() (id [rangeLogBoot]byte) {
	b, _ := os.ReadFile("/proc/sys/kernel/random/boot_id")
	copy(id[:], bytes.TrimSpace(b))
	return id
}

// openRangeLog opens (or creates) the range log in the store directory
// root of fs and reads its entries: seq and value, in order. A log that
// cannot be opened or read (the disk full as it is made) is there but
// unused: range records take the synced commit.
func openRangeLog(fs vfs.FS, root string) (*rangeLog, []rangeEntry) {
	l := &rangeLog{boot: bootID()}
	f, err := fs.OpenReadWrite(fs.PathJoin(root, rangeLogName), vfs.WriteCategoryUnspecified)
	if err != nil {
		log.Printf("versionstore: range log: %v (range records are committed one by one)", err)
		return l, nil
	}
	data, err := io.ReadAll(io.NewSectionReader(f, 0, 1<<40))
	if err != nil {
		f.Close()
		log.Printf("versionstore: range log: %v (range records are committed one by one)", err)
		return l, nil
	}
	l.f = f
	var entries []rangeEntry
	if len(data) >= rangeLogHeader && binary.BigEndian.Uint32(data) == rangeLogMagic {
		l.gen = binary.BigEndian.Uint64(data[4:])
		if bytes.Equal(data[12:rangeLogHeader], l.boot[:]) {
			entries = parseRangeLog(data[rangeLogHeader:], l.gen)
		}
	}
	return l, entries
}

// rangeEntry is one entry of the range log.
type rangeEntry struct {
	seq   uint64
	value []byte
}

// parseRangeLog reads the entries of generation gen from b, up to the
// first that is cut short, fails its CRC or is of another generation.
func parseRangeLog(b []byte, gen uint64) []rangeEntry {
	var out []rangeEntry
	for len(b) >= rangeLogFixed {
		n := int(binary.BigEndian.Uint32(b))
		if n < rangeLogFixed || n > len(b) {
			break
		}
		if crc32.Checksum(b[8:n], castagnoli) != binary.BigEndian.Uint32(b[4:]) || binary.BigEndian.Uint64(b[8:]) != gen {
			break
		}
		seq := binary.BigEndian.Uint64(b[16:])
		if len(out) > 0 && seq <= out[len(out)-1].seq {
			break
		}
		out = append(out, rangeEntry{seq: seq, value: b[rangeLogFixed:n]})
		b = b[n:]
	}
	return out
}

// encodeRangeEntry is an entry of generation gen for event seq.
func encodeRangeEntry(gen, seq uint64, value []byte) []byte {
	b := make([]byte, rangeLogFixed+len(value))
	binary.BigEndian.PutUint32(b, uint32(len(b)))
	binary.BigEndian.PutUint64(b[8:], gen)
	binary.BigEndian.PutUint64(b[16:], seq)
	copy(b[rangeLogFixed:], value)
	binary.BigEndian.PutUint32(b[4:], crc32.Checksum(b[8:], castagnoli))
	return b
}

// reset empties the log (l.mu held, or no other goroutine yet): a
// header of the next generation. Until one succeeds after a failure, the
// log is not used (range records take the synced commit).
func (l *rangeLog) reset() {
	if l.f == nil {
		return // never usable
	}
	var h [rangeLogHeader]byte
	binary.BigEndian.PutUint32(h[:], rangeLogMagic)
	binary.BigEndian.PutUint64(h[4:], l.gen+1)
	copy(h[12:], l.boot[:])
	if _, err := l.f.WriteAt(h[:], 0); err != nil {
		if l.usable {
			log.Printf("versionstore: range log: %v (range records are committed one by one until it is written)", err)
		}
		l.usable = false
		return
	}
	l.gen++
	l.end = rangeLogHeader
	l.pending.Store(0)
	l.usable = true
}

// replayRangeLog sets again the entries a kill -9 took out of Pebble's
// log (those above the newest event it holds), makes them durable, and
// empties the log. It runs in load, before anything reads events.
func (s *Store) replayRangeLog(entries []rangeEntry) error {
	last, err := s.lastKey(prefixEvent)
	if err != nil {
		return err
	}
	var newest uint64
	if last != nil {
		if newest, err = decodeU64Key(prefixEvent, last); err != nil {
			return err
		}
	}
	b := s.db.NewBatch()
	defer b.Close()
	for _, e := range entries {
		if e.seq > newest {
			b.Set(eventKey(e.seq), e.value, nil)
		}
	}
	if !b.Empty() {
		if err := s.commit(b, pebble.Sync); err != nil {
			return err
		}
		if err := s.wal.SyncWAL(); err != nil {
			return err
		}
	}
	s.rlog.reset()
	return nil
}

// commitRange commits b, which sets range record event seq to value
// (and nothing else), without waiting for Pebble's log writer, and
// writes the entry that keeps it against a kill -9. applied reports
// whether b is committed (an error after it means the record may not
// outlive a kill; the caller refuses the change).
func (s *Store) commitRange(b *pebble.Batch, seq uint64, value []byte) (applied bool, err error) {
	l := s.rlog
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.usable {
		if err := s.apply(b, pebble.Sync); err != nil {
			return false, err
		}
		l.reset() // every entry is in Pebble's log: the log may be used again
		return true, nil
	}
	if err := s.commit(b, pebble.NoSync); err != nil {
		return false, err
	}
	crashpoint.Hit("record.nosync")
	entry := encodeRangeEntry(l.gen, seq, value)
	if l.end+int64(len(entry)) > rangeLogMax {
		// Full: Pebble's log is made to hold this record with the rest.
		return true, s.syncedBehind()
	}
	if _, err := l.f.WriteAt(entry, l.end); err != nil {
		// No entry: wait for Pebble's log to hold the record instead.
		if serr := s.syncedBehind(); serr != nil {
			return true, errors.Join(fmt.Errorf("versionstore: range log: %w", err), serr)
		}
		return true, nil
	}
	l.end += int64(len(entry))
	l.pending.Add(1)
	return true, nil
}

// syncedBehind (rangeLog.mu held) waits until Pebble's log holds every
// batch committed before it, then empties the range log (a reset that
// fails leaves it unused, rangeLog.usable).
func (s *Store) syncedBehind() error {
	if err := s.db.LogData(nil, pebble.Sync); err != nil {
		return fmt.Errorf("versionstore: %w", err)
	}
	s.rlog.reset()
	return nil
}

// flushRangeLog (rangeLog.mu not held) makes Pebble's log hold every
// entry of the range log and empties it: before Pebble's log files are
// synced, so that a synced log holds every record committed before.
func (s *Store) flushRangeLog() error {
	l := s.rlog
	if l.pending.Load() == 0 {
		return nil
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.pending.Load() == 0 {
		return nil
	}
	return s.syncedBehind()
}
