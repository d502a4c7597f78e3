package main

// The SQLite workload (issue 16): python3's sqlite3 module runs 100
// transactions of 100 updates of random rows into a 200 MB database that
// existed before the turn, as an agent's test suite does to its fixture
// database. Each repetition builds a new database for each step (untimed,
// on the native filesystem: new random content, so that no configuration's
// store finds it already stored), and the step copies it into the configuration's
// directory (untimed, in a turn of its own on ckptfs) before the timed
// turn. Run with the default rollback journal (journal_mode=DELETE) and
// with WAL.
//
// For ckptfs configurations it also records the store's growth over the
// timed turn against the bytes of the pages the turn changed: the pages
// of the database file that differ from the copy it started from (exact:
// SQLite writes whole pages), times the page size. Issue 16's targets:
// C/N <= 1.5, growth <= 2x the pages changed.

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"time"
)

// sqliteBuild makes the database: table t of rows rows, each an integer
// key and a text payload of 184 hex digits (about 200 bytes a row on
// disk). Arguments: PATH ROWS.
const sqliteBuild = `
import sqlite3, sys
c = sqlite3.connect(sys.argv[1])
c.execute("PRAGMA journal_mode=DELETE")
c.execute("CREATE TABLE t(id INTEGER PRIMARY KEY, payload TEXT NOT NULL)")
c.execute("WITH RECURSIVE n(x) AS (SELECT 1 UNION ALL SELECT x+1 FROM n WHERE x < ?) "
          "INSERT INTO t SELECT x, hex(randomblob(92)) FROM n", (int(sys.argv[2]),))
c.commit()
c.close()
`

// sqliteUpdate runs TXNS transactions of PER updates of random rows (the
// same rows on every configuration: seeded), each setting a new payload
// of the same length, in journal mode MODE; sqlite3's defaults otherwise
// (synchronous=FULL). Arguments: PATH MODE SEED TXNS PER.
const sqliteUpdate = `
import random, sqlite3, sys
path, mode, seed, txns, per = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
r = random.Random(seed)
c = sqlite3.connect(path, isolation_level=None)
got = c.execute("PRAGMA journal_mode=" + mode).fetchone()[0]
if got.lower() != mode.lower():
    sys.exit("journal_mode is %s, want %s" % (got, mode))
n = c.execute("SELECT max(id) FROM t").fetchone()[0]
for _ in range(txns):
    c.execute("BEGIN")
    for _ in range(per):
        c.execute("UPDATE t SET payload = ? WHERE id = ?", (r.randbytes(92).hex().upper(), r.randint(1, n)))
    c.execute("COMMIT")
c.close()
`

const (
	sqliteTxns = 100 // transactions in the turn
	sqlitePer  = 100 // row updates per transaction
)

// sqliteModes are the journal modes run, one step each.
var sqliteModes = []string{"DELETE", "WAL"}

// sqliteRun is the workload's state across configurations.
type sqliteRun struct {
	dir   string   // WORK/sqlite: the repetition's databases
	modes []string // the journal modes, one step each
	built int      // the repetition whose databases are built, plus one
	// before is each ckptfs configuration's store size before the timed
	// turn, by configuration.
	before map[string]int64
}

// template is the repetition's database for the step in journal mode mode.
func (s *sqliteRun) template(mode string) string { return filepath.Join(s.dir, mode+".db") }

func globalSqlite(ctx context.Context, g *global) error {
	if _, err := command(ctx, "", nil, "python3", "-c", "import sqlite3"); err != nil {
		return fmt.Errorf("skipped: python3 with sqlite3 unavailable: %w", err)
	}
	g.sqlite = &sqliteRun{dir: filepath.Join(g.b.o.work, "sqlite"), modes: sqliteModes, before: map[string]int64{}}
	if err := os.MkdirAll(g.sqlite.dir, 0o755); err != nil {
		return err
	}
	g.note = fmt.Sprintf("python3 sqlite3: %d transactions of %d updates of random rows into a database of %d rows (~%d MB), built anew for each repetition and copied in before the turn",
		sqliteTxns, sqlitePer, g.b.sz.sqliteRows, g.b.sz.sqliteRows*200/1000000)
	return nil
}

// sqliteStep is the timed turn in journal mode mode; suffix ends its
// name.
func sqliteStep(mode, suffix string) step {
	return step{
		name: fmt.Sprintf("sqlite %d×%d updates, %s%s", sqliteTxns, sqlitePer, mode, suffix),
		prep: func(ctx context.Context, e *env) error { return prepSqlite(ctx, e, mode) },
		run: func(ctx context.Context, e *env) error {
			_, err := e.command(ctx, e.dir, nil, "python3", "-c", sqliteUpdate, "sqlite.db", mode,
				strconv.Itoa(e.rep), strconv.Itoa(sqliteTxns), strconv.Itoa(sqlitePer))
			return err
		},
		post: func(ctx context.Context, e *env) error { return postSqlite(ctx, e, mode) },
	}
}

// teardownSqlite removes the database and its journal files.
func teardownSqlite(ctx context.Context, e *env) error {
	for _, suffix := range []string{"", "-journal", "-wal", "-shm"} {
		if err := removeIfExists(e.p("sqlite.db" + suffix)); err != nil {
			return err
		}
	}
	return nil
}

// prepSqlite builds the repetition's databases (once, natively, as the
// bench) and copies mode's into the target's directory; on ckptfs in a
// turn of its own, after which it waits for the daemon to go idle and
// notes the store's size.
func prepSqlite(ctx context.Context, e *env, mode string) error {
	s := e.sqlite
	if s.built != e.rep+1 {
		err := asRoot(func() error {
			for _, m := range s.modes {
				if err := removeIfExists(s.template(m)); err != nil {
					return err
				}
				if _, err := command(ctx, "", nil, "python3", "-c", sqliteBuild, s.template(m), strconv.Itoa(e.b.sz.sqliteRows)); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			return err
		}
		s.built = e.rep + 1
	}
	c := ckptfsOf(e.t)
	if c != nil {
		if err := c.Begin(ctx); err != nil {
			return err
		}
	}
	for _, suffix := range []string{"", "-journal", "-wal", "-shm"} {
		if err := removeIfExists(e.p("sqlite.db" + suffix)); err != nil {
			return err
		}
	}
	if err := copyPlain(s.template(mode), e.p("sqlite.db")); err != nil {
		return err
	}
	if c == nil {
		return nil
	}
	if err := c.End(ctx); err != nil {
		return err
	}
	syscall.Sync()
	if cpu := cpuSeconds(c.DaemonPID()); cpu >= 0 {
		settle(c.DaemonPID(), cpu, 30*time.Second)
	}
	s.before[e.t.Name()], _ = c.storeUsage()
	return nil
}

// postSqlite records, on ckptfs, the store's growth over the timed turn
// against the bytes of the pages it changed.
func postSqlite(ctx context.Context, e *env, mode string) error {
	c := ckptfsOf(e.t)
	if c == nil {
		return nil
	}
	now, ok := c.storeUsage()
	if !ok {
		return nil
	}
	grown := now - e.sqlite.before[e.t.Name()]
	pages, size, err := pagesChanged(e.sqlite.template(mode), e.p("sqlite.db"))
	if err != nil {
		return err
	}
	st := storedRow{
		Op:      fmt.Sprintf("sqlite %d×%d updates, %s, rep %d [%s: store blocks; changed: %d pages of %d B]", sqliteTxns, sqlitePer, mode, e.rep+1, e.t.Name(), pages, size),
		Changed: pages * size,
		Stored:  grown,
	}
	if st.Changed > 0 {
		st.PerByte = float64(st.Stored) / float64(st.Changed)
	}
	e.b.res.Stored = append(e.b.res.Stored, st)
	e.b.logf("sqlite   stored: %s: %d bytes for %d changed (%.2f×)", st.Op, st.Stored, st.Changed, st.PerByte)
	return nil
}

// ckptfsOf is the ckptfs mount behind t (C or Cu), or nil.
func ckptfsOf(t target) *ckptfsTarget {
	switch c := t.(type) {
	case *ckptfsTarget:
		return c
	case *userCkptfs:
		return c.ckptfsTarget
	}
	return nil
}

// pagesChanged compares two SQLite database files page by page and
// returns how many pages of the second differ from the first's (pages
// past the first's end count as changed) and the page size, from the
// first's header.
func pagesChanged(before, after string) (pages, size int64, err error) {
	a, err := os.Open(before)
	if err != nil {
		return 0, 0, err
	}
	defer a.Close()
	b, err := os.Open(after)
	if err != nil {
		return 0, 0, err
	}
	defer b.Close()
	var hdr [100]byte
	if _, err := a.ReadAt(hdr[:], 0); err != nil {
		return 0, 0, fmt.Errorf("%s: header: %w", before, err)
	}
	size = int64(binary.BigEndian.Uint16(hdr[16:18]))
	if size == 1 {
		size = 65536
	}
	if size < 512 {
		return 0, 0, fmt.Errorf("%s: page size %d: not an SQLite database", before, size)
	}
	pa, pb := make([]byte, size), make([]byte, size)
	for {
		nb, errb := io.ReadFull(b, pb)
		if nb == 0 {
			break
		}
		na, _ := io.ReadFull(a, pa)
		if na != nb || string(pa[:na]) != string(pb[:nb]) {
			pages++
		}
		if errb != nil {
			break
		}
	}
	return pages, size, nil
}

// copyPlain copies src to a new file dst with read and write, not
// copy_file_range (which a FUSE mount would see as one request of its own
// or turn into a clone).
func copyPlain(src, dst string) error {
	return newFileFrom(src, dst, func(in, out *os.File) error {
		buf := make([]byte, 1<<20)
		_, err := io.CopyBuffer(struct{ io.Writer }{out}, struct{ io.Reader }{in}, buf)
		return err
	})
}

// newFileFrom makes the new file dst (mode 0644) and has fill write it
// from src; dst is removed if that fails.
func newFileFrom(src, dst string, fill func(in, out *os.File) error) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	err = fill(in, out)
	if err2 := out.Close(); err == nil {
		err = err2
	}
	if err != nil {
		return errors.Join(fmt.Errorf("%s: %w", src, err), os.Remove(dst))
	}
	return nil
}
