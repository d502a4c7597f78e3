package versionstore

import (
	"encoding/binary"
	"fmt"
)

// Key schema. Every key starts with one byte naming its kind; integers are
// big-endian so that keys sort numerically.
//
//	meta     'm' name                      value: depends on name
//	         'm' "format"                  decimal format version ("2")
//	         'm' "journal"                 JSON rewindJournal, present only while a rewind runs
//	         'm' "journal-plan"            JSON []action: the journal's plan (kept apart:
//	                                       saving progress does not rewrite it)
//	         'm' "rename" seq[8]           the rename or exchange event seq is recorded
//	                                       but not yet confirmed done (RecordRename,
//	                                       RecordExchange); value: empty, or for an
//	                                       exchange ino(Path)[8] ino(To)[8], the inode
//	                                       numbers of both names just before it
//	         'm' "rewound" num[8]          target[8]: turn num is a whole-tree rewind to
//	                                       target that finished with every path as it
//	                                       was then (its bytes known): a later rewind's
//	                                       reverse pass may skip from num's end to
//	                                       target's (rewindJumps); none below the
//	                                       history start
//	         'm' "manifest"                JSON manifestInfo: a manifest of the tree
//	                                       was saved at the last clean unmount
//	         'm' "history"                 JSON historyInfo: where history starts
//	                                       (history.go); absent: at turn 0
//	         'm' "policy"                  JSON ckpt.Policy: the retention policy
//	                                       (policy.go); absent: the defaults
//	         'm' "excludes"                JSON []string: the --exclude patterns the
//	                                       mounts use (settings.go); absent: none given yet
//	         'm' "project"                 JSON Project: the project directory the store
//	                                       was last mounted over (settings.go)
//	         'm' "ranged"                  JSON rangedInfo: the paths range records were
//	                                       made of, at their names now, as of a seq
//	                                       (seal.go)
//	manifest 'w' path-bytes                JSON manifestEntry: one path's state at that
//	                                       unmount (offline.go); present only between
//	                                       an unmount and the next mount
//	seal     'S' path-bytes                JSON sealEntry: the bytes of a range-kept file
//	                                       as that unmount found it (seal.go); present
//	                                       only with the manifest
//	turn     't' num[8]                    JSON Turn; none below the history start
//	prompt   'P' num[8]                    the whole text turn num was opened with
//	                                       (ckpt.Turn.Prompt); present only when it
//	                                       says more than the turn's label
//	pin      'p' num[8]                    JSON ckpt.Pin: turn num is pinned (pins.go)
//	step     's' num[8] k[2]               JSON ckpt.Step: step k (from 1) of turn num ended
//	                                       (steps.go); the last step of a turn has none
//	                                       (it ends with the turn)
//	ref      'r' ref-bytes                 num[8]: the turn the ref names
//	event    'e' seq[8]                    JSON record: one change-log entry
//	chunk    'c' sha256[32]                codec[1] payload: one content chunk
//	                                       (codec 0 raw, 1 zstd); the key is the
//	                                       SHA-256 of the uncompressed bytes
//
//	+-----+--------------------------------+
//	| 'e' | seq (uint64, big-endian)       |   event key, 9 bytes
//	+-----+--------------------------------+
//	| 't' | turn number (uint64, BE)       |   turn key, 9 bytes
//	+-----+--------------------------------+
//	| 'c' | SHA-256 of the plain chunk     |   chunk key, 33 bytes
//	+-----+--------------------------------+
//
// Events are numbered by one global sequence; a turn's events are the
// contiguous range Turn.FirstSeq..Turn.LastSeq. Ordering them by key is
// ordering them in time. Forgetting the oldest turns (history.go) deletes
// the turn and prompt keys below the new start and the event keys up to
// its end with one range deletion each, in one batch; garbage collection (gc.go)
// deletes the chunks no event references, with a range deletion for every
// run of such keys that no referenced key interrupts.
const (
	prefixMeta  = 'm'
	prefixTurn  = 't'
	prefixRef   = 'r'
	prefixEvent = 'e'
	prefixChunk = 'c'
	prefixWalk  = 'w'
	prefixPin   = 'p'
	prefixText  = 'P'
	prefixStep  = 's'
	prefixSeal  = 'S'
)

var (
	keyFormat      = []byte("mformat")
	keyJournal     = []byte("mjournal")
	keyJournalPlan = []byte("mjournal-plan")
	keyManifest    = []byte("mmanifest")
	keyRanged      = []byte("mranged")
	keyHistory     = []byte("mhistory")
	keyPolicy      = []byte("mpolicy")
	keyExcludes    = []byte("mexcludes")
	keyProject     = []byte("mproject")
	keyUnsaved     = []byte("munsaved")
)

func u64Key(prefix byte, n uint64) []byte {
	k := make([]byte, 9)
	k[0] = prefix
	binary.BigEndian.PutUint64(k[1:], n)
	return k
}

func turnKey(n uint64) []byte  { return u64Key(prefixTurn, n) }
func eventKey(n uint64) []byte { return u64Key(prefixEvent, n) }
func pinKey(n uint64) []byte   { return u64Key(prefixPin, n) }
func textKey(n uint64) []byte  { return u64Key(prefixText, n) }

func decodeU64Key(prefix byte, k []byte) (uint64, error) {
	if len(k) != 9 || k[0] != prefix {
		return 0, fmt.Errorf("%w: bad key %q", ErrCorrupt, k)
	}
	return binary.BigEndian.Uint64(k[1:]), nil
}

// pendingRenamePrefix starts the keys of renames recorded but not yet
// confirmed (pendingRenameKey).
var pendingRenamePrefix = []byte("mrename")

func pendingRenameKey(seq uint64) []byte {
	k := append([]byte(nil), pendingRenamePrefix...)
	return binary.BigEndian.AppendUint64(k, seq)
}

// rewoundPrefix starts the keys of the rewind turns a reverse pass may
// skip (rewoundKey).
var rewoundPrefix = []byte("mrewound")

func rewoundKey(turn uint64) []byte {
	k := append([]byte(nil), rewoundPrefix...)
	return binary.BigEndian.AppendUint64(k, turn)
}

func refKey(ref string) []byte { return append([]byte{prefixRef}, ref...) }

func chunkKey(sum [32]byte) []byte { return append([]byte{prefixChunk}, sum[:]...) }

// upper returns the exclusive upper bound of all keys with prefix p.
func upper(p byte) []byte { return []byte{p + 1} }
