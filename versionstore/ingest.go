package versionstore

import (
	"bytes"
	"context"
	"fmt"
	"path/filepath"
	"sort"
	"strconv"
	"sync/atomic"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/objstorage/objstorageprovider"
	"github.com/cockroachdb/pebble/v2/sstable"
	"github.com/cockroachdb/pebble/v2/vfs"
)

// Large content does not go through Pebble's WAL. A chunk committed in a
// batch is written twice, once to the WAL and once to the table a flush
// makes of the memtable, and Pebble keeps up to three WAL files of up to
// MemTableSize for reuse: a 64 MiB capture grew the store by 1.54 times
// its size. Content of ingestMin bytes and more is written instead as
// sorted tables of at most ingestTable encoded bytes and ingested (DB.Ingest
// links the file into the LSM and fsyncs it and the MANIFEST): its chunks
// are on disk once, and durable before the event that names them is
// committed (ordering rule 2 in doc.go holds a fortiori).
const ingestMin = 4 << 20

var ingestTable = 32 << 20 // a variable for the tests

// ingests counts ingested tables (tests).
var ingests atomic.Int64

type chunkKV struct{ key, val []byte }

// chunkSink receives the new chunks of one putContent call: into a batch
// (committed without sync every batchBytes) for small content, into tables
// to ingest once the content is known to be large.
type chunkSink struct {
	s      *Store
	batch  *pebble.Batch
	ingest bool
	kvs    []chunkKV
	size   int
	seen   map[string]bool
}

func (s *Store) newChunkSink(sizeHint int64) *chunkSink {
	return &chunkSink{s: s, batch: s.db.NewBatch(), ingest: sizeHint >= ingestMin && s.ingestDir != ""}
}

func (c *chunkSink) add(key, val []byte) error {
	if !c.ingest {
		if err := c.batch.Set(key, val, nil); err != nil {
			return err
		}
		if c.batch.Len() < batchBytes {
			return nil
		}
		if err := c.s.commit(c.batch, pebble.NoSync); err != nil {
			return err
		}
		c.batch.Close()
		c.batch = c.s.db.NewBatch()
		// The content turned out large (it grew since it was stat'ed, or
		// nobody knew its size): the rest goes into tables.
		c.ingest = c.s.ingestDir != ""
		return nil
	}
	if c.seen == nil {
		c.seen = map[string]bool{}
	}
	if c.seen[string(key)] {
		return nil // a table holds a key once
	}
	c.seen[string(key)] = true
	c.kvs = append(c.kvs, chunkKV{key: append([]byte(nil), key...), val: val})
	c.size += len(key) + len(val)
	if c.size >= ingestTable {
		return c.flushTable()
	}
	return nil
}

// flushTable writes the pending chunks as one sorted table and ingests it.
func (c *chunkSink) flushTable() error {
	if len(c.kvs) == 0 {
		return nil
	}
	sort.Slice(c.kvs, func(i, j int) bool { return bytes.Compare(c.kvs[i].key, c.kvs[j].key) < 0 })
	fs := c.s.wal
	name := filepath.Join(c.s.ingestDir, strconv.FormatUint(c.s.ingestSeq.Add(1), 10)+".sst")
	f, err := fs.Create(name, vfs.WriteCategoryUnspecified)
	if err != nil {
		return fmt.Errorf("versionstore: %w", err)
	}
	defer fs.Remove(name) // Ingest linked (or copied) it into the LSM
	w := sstable.NewWriter(objstorageprovider.NewFileWritable(f), sstable.WriterOptions{
		TableFormat: c.s.db.FormatMajorVersion().MaxTableFormat(),
		Compression: sstable.NoCompression, // chunks are compressed already
	})
	for _, kv := range c.kvs {
		if err := w.Set(kv.key, kv.val); err != nil {
			w.Close()
			return fmt.Errorf("versionstore: write table: %w", err)
		}
	}
	if err := w.Close(); err != nil {
		return fmt.Errorf("versionstore: write table: %w", err)
	}
	if err := c.s.db.Ingest(context.Background(), []string{name}); err != nil {
		c.s.noteErr(err)
		return fmt.Errorf("versionstore: ingest: %w", pebbleErr(err))
	}
	ingests.Add(1)
	c.kvs, c.size = c.kvs[:0], 0
	return nil
}

// finish commits or ingests what is pending.
func (c *chunkSink) finish() error {
	if !c.batch.Empty() {
		if err := c.s.commit(c.batch, pebble.NoSync); err != nil {
			return err
		}
	}
	return c.flushTable()
}

func (c *chunkSink) close() { c.batch.Close() }
