// Package versionstore owns the history of one tree: turns, the prior state
// of everything that changed, and the content bytes, in a Pebble database.
// It knows nothing of FUSE: the overlay (fusefs) describes captures with the
// types of internal/ckpt, and rewinds act on the tree through the
// ckpt.Tree interface (implemented by internal/backing).
//
// # Model: a change log of before-images
//
// The live tree is the newest state. History is a log of events, numbered
// by one global sequence (see keys.go for the byte layout):
//
//   - prior(P, state, bytes): P's whole state just before its first change
//     in the open turn (type, mode, owner, symlink target, or the bytes of a
//     regular file, or "absent"). Later changes of P in the same turn record
//     nothing.
//   - meta(P, mode, owner): P's mode and owner before a chmod/chown of a
//     regular file; its bytes are not copied.
//   - range(P, state, spans): for a big regular file written in place,
//     its state before the turn and the prior bytes of only the spans the
//     turn's writes and truncates changed (ranges.go); its other bytes
//     are those of the path's next record, or of the live file.
//   - rename(P, Q) and exchange(P, Q): recorded as one event, whatever the
//     size of the directory renamed.
//
// The prior state of anything but a directory also names its inode and
// its other names (see Hard links).
//
// A turn is a contiguous range of events. The state of path P at the end
// of turn N is found by one forward scan of the events after N: the first
// prior event for P answers (a range event answers with the bytes of the
// path's next record put under its spans); a rename of P (or of a parent) moves the
// question to the new name; a rename over P answers "absent"; an exchange
// swaps the question; if no event answers, P is as it is in the live tree
// now. One scan answers many paths at once (resolveMany), so the cost of
// `show`, `diff`, `cat` and a rewind grows with the events since N, never
// with the size of the tree.
//
// # Content
//
// Prior bytes are kept in one of four ways:
//
//   - chunks: content-defined chunks (a gear rolling hash, about 128 KiB
//     each), keyed by their SHA-256, zstd-compressed when that helps, stored
//     once however many versions share them. Every read checks the sum; a
//     mismatch is ErrCorrupt, never returned as content.
//   - the attic (only on a real filesystem): when the overlay is about to
//     drop its last name for an inode (unlink, rename over it) and nothing
//     else can write the inode, it hard-links the inode into
//     <store>/attic/<hex> instead of copying it, so deleting or replacing a
//     1 GiB file costs a link, not a copy. Attic files are never written
//     again. Their bytes are not checksummed (that would mean reading the
//     file at the moment it is deleted); instead the size, inode number and
//     mtime seen when it was linked are recorded, and every read (and
//     Verify) refuses a file that differs: a write into it or a
//     replacement is ErrCorrupt, silent bit rot is not detected.
//   - a clone in the attic (clone.go): where the attic's filesystem shares
//     extents (FICLONE: XFS with reflink=1, btrfs) and the file is on it,
//     the prior bytes of a file of cloneMin (1 MiB) and more that stays in
//     the tree (a write or truncate) are cloned into a new attic file
//     rather than copied: O(1), no space until the file diverges. It is an
//     attic file like a linked one (never written again, size, inode and
//     mtime recorded), so every reader, Verify, GC and du treat it alike.
//     Whether the store clones is learnt by the first attempt and
//     remembered; a failed clone falls back to the copy.
//   - a part of a span file in the attic (spans.go): the bytes of a range
//     record of a few blocks (at most rangeBatchMax), one pwrite into the
//     turn's span file, which holds the records' bytes one after another
//     (contentRef.Part, Off). Each part carries a CRC-32C checked at every
//     read and by Verify; the file grows while its turn is open, so only
//     its inode is recorded. A store without an attic keeps them as chunks.
//
// # Rewind
//
// Rewind(N) undoes the events after N from newest to oldest, recording
// every change it makes as the events of a new turn of kind rewind (so a
// rewind can be rewound). Because a turn records only first changes, the
// tree between two events of one turn is not always reconstructible, so
// the undo steps are lenient (a missing side of a rename is left to an
// older event), and a fix-up pass then compares every path the log
// mentions with its target state by forward resolution and sets whatever
// still differs (the model tests check that it normally has nothing to
// do). Restore(N, paths) plans the actions up front by forward resolution,
// following renames back to the names the paths had at N. TreeAt(N)
// (snapshot.go: checkout) resolves the same candidates the same way and
// takes every other path from a walk of the live tree, so it lists what a
// rewind to N would leave without changing anything; TreeDelta(B, N)
// (export) is Changes(B, N) with N's bytes.
//
// The reverse pass skips earlier rewinds: a whole-tree rewind turn R to
// turn T that finished with every path's bytes restored is noted (key
// 'm' "rewound"), and left the tree as at T's end. So once a later
// rewind to T or before has undone the events after R, the tree is as
// at T's end, and the pass goes on from there, skipping R's events and
// those between T and R (rewindJumps; the newest such R first, then
// again at or below T). Without this, every rewind undid every earlier
// rewind since its target, each of which had undone those before it:
// rewinding back and forth k times over a turn of r renames recorded
// O(2^k·r) renames, now r each time. The jumps are planned before the
// first step and kept in the journal, so Recover follows the same path.
// They only spare work: the fix-up and link passes still resolve by the
// whole log, so a rewind R that left a path otherwise than at T (an
// owner it could not set) costs a fix-up, never a wrong tree. Restores
// are not noted (they leave the rest of the tree as it was). Not
// skipped: a rewind to a turn before ours (to reach a turn between that
// rewind's target and itself, its own renames must be undone), so
// rewinding to turns 1, 2, 3, ... of a long history in that order still
// costs more each time, until the fix-up pass alone is cheaper
// (replayLimit). Forward resolution (Changes, dry runs, planning) does
// not skip: it scans every event since the target.
//
// # Revert
//
// Revert(N) (revert.go) undoes one past turn and keeps the later ones. It
// plans per path, three ways: base the state at the end of N, ours now,
// theirs the state before N (renames N made are undone where nothing
// later renamed the path again; later renames are followed). A path
// nothing later changed becomes theirs; one changed both by N and later
// is merged field by field (mode and owner, symlink target, a text
// file's lines by internal/merge3, git merge-file's rules), and what
// cannot be merged is a conflict: the revert then changes nothing
// (ErrConflict), unless the conflicts are in text lines only and markers
// were asked for. The plan is run as a restore's is: a journal of
// actions that each carry their bytes in the store, so Recover finishes a
// revert like a restore. Its turn is of kind revert. Hard links are not
// regrouped: names that share an inode before the turn and now stay
// together (keepLinks), and a path given an inode of its own, parted from
// names the revert leaves as they are, is named as a restore names its
// splits (SplitLinks; its dry run the same). Its list of changes is what its turn records: a rename
// undone is one only where the object is renamed back (movesBack); a
// directory is made again and its files moved back one by one, so it is
// listed added and its other name deleted.
//
// # Hard links
//
// A record of the prior state of anything but a directory (a regular file,
// symlink, FIFO, socket or device node: ckpt.Type.Linkable) also names
// its inode then (Inode: device, inode number and link count;
// record.Inode) and, when it had several links, its other names then
// (record.Links); the overlay knows every name of a multi-link file
// (fusefs/links.go), and a rewind's own captures find them the same way
// (links.go: the overlay's list through ckpt.LinkNamer, else one walk
// of the tree per rewind). The identity is kept in the record, not in
// ckpt.State: States are compared everywhere (offline changes, compare,
// ensure), and two paths with equal States may or may not share an inode.
//
// The claim: at the end of turn N, paths p and q (neither a directory)
// shared an inode iff their resolutions (resolveMany) name the same device
// and inode number, where a path resolved from a record has the record's
// identity and a path with no event since N the identity of its live
// inode. Why:
//
//   - Every change of what a name points to (unlink, rename to or over it,
//     create, link, a rewind's change) records that name first, and a
//     write, chmod or chown through one name records every name of the
//     inode first. So the first record of a path after N (following
//     renames and exchanges, which move names but keep inodes) was taken
//     while the path still had its inode of N; a path with no event since
//     N still has it. Each resolution names the inode the path had at N.
//   - All those inodes existed at N, and no two inodes that exist at one
//     moment share a device and inode number, so equal numbers mean the
//     same inode; an inode number reused later does not matter (no birth
//     time is needed).
//   - Rewinds over rewinds: a rewind records what it changes like the
//     overlay does (identity and names included), so the claim holds for
//     its turn too. Records without an identity (records of older stores,
//     offline records) say nothing: such a path is in no group, and a
//     rewind neither joins nor splits it.
//
// A path untouched since N that shared an inode with a recorded path has
// no record of its own; the record's Links name it. Changes compares, at
// each end, the partition of the paths the events name and of the names
// their records list, and reports a path whose bytes, mode and type are
// the same but whose partition differs as kind "link" (Relinked); an end
// that is the live tree also counts the names it does not know by the
// link count. Against the live tree (dry runs, the changes a rewind
// reports) this is exact when the records list every name; between two
// ends in the past, a name that shared the inode at one end but was
// unlinked after the other before any record of the path is not seen.
//
// A rewind restores bytes, modes and owners first, every file, symlink or
// node it makes being a new inode; it never chmods or chowns one with
// several links in place (that would change its other names), it gives it
// an inode of its own (setFileMeta, split: a copy of a regular file's
// bytes, or a new symlink or node made beside it and renamed over it).
// Then a link pass (planLinks) gives the paths the partition of the
// target: it groups the paths in play (the fix-up pass's candidates, the
// names their records list) by target identity, and looks at the inodes
// they have now. On a whole-tree rewind every name of an inode the pass
// does not know (its link count is higher than the names it knows) was
// untouched since the target, so that inode is the one it had then: it
// stays with the group whose target it is. For each group the pass picks a
// home inode the group may keep (held by none of another group, nor by a
// path it cannot move), else one of its files gets an inode of its own (a
// split); then every other member becomes a hard link of the home
// (Tree.Hardlink: a temporary name renamed over the path). Splits come
// before links, each action records what it replaces first, checks whether
// it is done already (a split knows the inode it leaves, a link whether
// the path is a name of the home), and is journaled like the fix-up
// pass's: a crash redoes it. A restore gives the paths below its prefixes
// the target partition among themselves; they share an inode with a path
// outside only if that path is untouched since (found through the records'
// Links, or among the names of an inode one of them has now and had
// then), and a name it cannot know keeps its inode from them. So a
// restored path that shares its inode with a name outside, and does not
// stay on it, is split from that name, which keeps its bytes: the
// restore reports each such split (LinkSplit), and its dry run predicts
// them by the pass's rule (predictSplits).
//
// # Ordering rules: what is durable before what
//
//  1. A capture is committed to Pebble with pebble.Sync before Record
//     returns, and the overlay changes the backing file only after Record
//     returned. Pebble's WAL Sync is wrapped (walsync.go) so that it means
//     "written to the kernel", not "flushed to disk": a capture survives a
//     kill -9 of the daemon at once, and costs a write(2), not an fsync.
//     A range record whose bytes are in a span file (or which has none)
//     is the exception: it is committed without waiting for Pebble's log
//     writer and written to the range log by the committing goroutine
//     instead, which the next Open replays (rangelog.go); any synced
//     commit after it empties that log, and rule 2 does not apply to it.
//  2. Chunk data is committed without sync before the event that refers to
//     it, or in the event's own batch (a range record of a few blocks
//     where the store has no attic);
//     the event's synced commit comes later in the same WAL and so
//     makes the chunks durable with it. Content of 4 MiB and more is
//     instead written as sorted tables and ingested (ingest.go): the
//     ingestion fsyncs the table and the MANIFEST before the event is
//     committed, and the bytes are written once, not to the WAL and again
//     to a flushed table.
//  3. An attic link is made before the event that names it is committed, and
//     the overlay unlinks its own name only after that: a crash in between
//     leaves an unreferenced attic file, never an event without its bytes.
//     A crash after the commit but before the overlay's unlink (or rename
//     over the name) leaves the inode named in the tree too, where a write
//     would change history: Recover gives such a record of the open turn
//     a copy of its own (UnshareAttic, crash point recover.unshared;
//     the overlay calls it too when the change fails).
//     A clone is made, and it and the attic directory fsynced, before the
//     event that names it is committed (crash point record.cloned): the
//     event survives a power loss once its turn ends (rule 4), so its
//     bytes must too, as an ingested table's do (rule 2). A crash before
//     the commit leaves an unreferenced attic file for the next GC.
//     A span file's part is written before the event that names it is
//     committed (crash point record.spans), and the file's name was made
//     durable (the attic directory fsynced) when the file was made; a gc
//     leaves the span file in use, which no event may name yet.
//  4. Begin and End (and so every turn boundary) commit the turn record
//     and then fsync every WAL file (SyncWAL): a closed turn survives a
//     power loss. A WAL file being closed by Pebble (rotation) is fsynced
//     too. A power loss can lose only events of the turn that was open.
//     Whatever makes events durable fsyncs the span file in use first: a
//     sync point (syncWAL; a turn boundary then lets go of the file,
//     rotateSyncWAL), a WAL file's close (which comes before any memtable
//     flush), and the reopen after a kill -9, before Pebble replays the
//     log (syncLeftSpans). Only the kernel's own writeback can make an
//     event of the open turn durable before its part (as it can before an
//     attic link's name): after a power loss such a part fails its size
//     or sum check (ErrCorrupt), never reads back wrong, and a rewind,
//     restore or revert that would read it, or a lost attic file, refuses
//     before it changes anything (checkKept).
//  5. A rewind first opens its turn and writes its journal (synced and
//     fsynced), then changes the tree step by step, saving its progress
//     after each step. Every step is idempotent, so Recover, run before the
//     tree is served again, redoes the step in progress and finishes the
//     rewind. An exchange back looks the same done and not done; its redo
//     looks for its own record among the events since the journal was
//     last saved (its Mark), which rule 6 has kept only if it was made,
//     and does not exchange twice. The last phase (the fix-up pass, or
//     the whole rewind when the events since the target far outnumber
//     the paths that differ) is a plan whose every action carries its
//     bytes in the store (or, patching a file in place, only the bytes
//     its layers hold), so that no action depends on what an earlier one
//     changed; the plan is fsynced before its first action. A power loss
//     may keep the tree's changes and lose the progress saved since the
//     last fsync, so that Recover redoes steps over a tree they already
//     changed: a redone step leaves its own result, steps on unrelated
//     paths do not interfere, and the reverse pass fsyncs its progress
//     before a step touches a path related to one a step touched since
//     the last fsync (stepPaths), and an exchange or rename back before
//     its syscall. After a power loss the rewind still completes exactly,
//     but the captures of the rewind turn itself may be lost (rule 4), so
//     that one rewind may not be undoable. A step that fails on bytes it
//     cannot read (a chunk, which checkKept does not read ahead) has the
//     rewind rolled back: a second journal in the same turn undoes the
//     turn's own records (rewind_rollback.go), which the rewind's captures
//     keep readable by checking any chunk they reuse. After a power loss
//     the rollback undoes only the changes whose records survived. A
//     record of a file still as recorded (the last step's, whose change
//     failed after its capture) is left as it is (stillAsRecorded). A
//     rollback that fails in turn ends the turn as it is.
//  6. A rename or exchange is recorded before the syscall, with a pending
//     mark in the same synced batch, and dropped again if the syscall
//     fails (commit(false)); success deletes the mark, synced too, before
//     the caller answers. A kill in between leaves the mark: Recover, run
//     before the tree is served, drops the record of one that never
//     happened and keeps the others. The deletion is synced because the
//     names may change again without a record once the caller has
//     answered (a name the turn holds already is removed): a mark must
//     never outlive that moment, or Recover would judge it by names the
//     move did not leave. Between the kill and Recover nothing changes
//     the tree, while the syscall ran the kernel held both parent
//     directories' locks, and the overlay makes one rename at a time
//     (fusefs: Root.ns), so no rename of an ancestor raced it. So a
//     rename whose source still exists did not happen. An exchange leaves
//     both names in place either way: its mark holds the inode numbers of
//     both names taken just before the syscall (RecordExchange), and it
//     did not happen if each name still has its own.
//  7. GC deletes only content no committed event names, with no capture
//     between looking for its chunks and committing its event (contentMu;
//     see gc.go); its deletions are unsynced: one lost in a crash is
//     garbage again. Moving the start of history is one synced batch.
//
// The moments between these steps are named crash points
// (internal/crashpoint: record.cloned, record.committed, rename.recorded, rewind.step,
// rewind.exchange.recorded, rewind.links, recover.marks, gc.batch, ...). The crash
// tests kill the store at them: in-process at every point a rewind, its
// recovery and the recording pass (crashpoint_test.go, links_test.go),
// and through the daemon, armed by CKPTFS_CRASH and chosen by the test's
// seed (tests/crashpoint_test.go).
//
// # Errors
//
// Sentinel errors carry the "versionstore:" prefix and are matched with
// errors.Is: ErrTurnNotFound, ErrNoOpenTurn, ErrRefTaken, ckpt.ErrStoreFull (a
// full disk under the store), ErrCorrupt, ErrNewerFormat (a store written by
// a newer format version is refused), ErrLocked (another process holds the
// store), ErrBadPath, ErrNoSpace (a rewind's files would not fit in the
// tree's filesystem: it is refused before anything changes), ErrDenied
// (a rewind's plan changes what the user the tree is changed as may not,
// a directory of root's in a private mount: refused before anything
// changes, rewind_perms.go).
//
// # Store faults
//
// Pebble treats a failed WAL or MANIFEST write as fatal (Logger.Fatalf:
// "pebble: fatal commit error"); Options.Fatal is called and the process
// exits. The daemon therefore dies rather than go on without history: its
// mount is left dead (ENOTCONN), so no change lands unrecorded, and the
// next mount replays the WAL. To keep a full disk from ever getting that
// far, Record checks the free space first and refuses with ckpt.ErrStoreFull
// (a record that keeps no bytes, such as an unlink linked into the attic,
// a rename or a chmod, is paid by the ballast when the disk has less than
// the headroom free, so rm and mv work on a full disk), and a ballast
// file gives Pebble's own background writes room when they
// meet ENOSPC anyway (space.go). A failed fsync at a turn boundary is
// returned by Begin or End, the turn being opened or closed all the same.
// Failed sstable writes (flush, compaction) are retried by Pebble; the
// captures wait in the WAL meanwhile. Health reports the last error and
// whether the store is full.
//
// # Changes made while unmounted
//
// A clean unmount saves a manifest of the tree (each path's state, inode
// and mtime); the next mount compares the tree with it before serving and
// records what differs as one turn of kind offline, dropping the manifest
// in the same batch (offline.go). A regular file that changed there has
// no prior bytes: its record is Lost, and cat, patches and rewinds name
// it instead of showing other bytes; but a file range records were made
// of, which its earlier versions rest on, the unmount seals (seal.go):
// its record gets the bytes it had then. An offline command that changed
// the tree saves the manifest (and the seals) again as it leaves it
// (control.OpenOffline), so that an edit made after it is told too.
// A daemon that ends but cannot save the manifest keeps why
// (NoteUnsaved), so that the next mount, finding none, says so rather
// than that the daemon crashed (TakeUnsaved; a manifest saved drops it).
//
// # Bounded history
//
// Forgetting the oldest turns moves the start of history forward
// (history.go): the events up to the new first turn's end, the turn
// records below it and their refs go in one synced batch of range
// deletions. Forgetting a turn in the middle merges it into the next
// kept turn (merge.go): the boundary between them goes, with the records
// of the merged turn that no resolution from a kept end reaches any more
// (a path's second record in one turn), in one synced batch. The
// retention policy (policy.go) says what to forget: it keeps every turn
// of its windows, thins older ones to the last of each hour and day, and
// forgets those older still; pins (pins.go) stop it. GC (gc.go) is a
// stateless mark and sweep of chunks and attic files against every
// event, in batches that hold captures off only while they commit
// (contentMu), then a compaction: a kill at any moment leaves garbage the
// next GC finds (crash points forget.committed, forget.merged, gc.*).
// usage.go reports what each turn alone holds (turnctl du).
//
// # Known limits
//
// Extended attributes are not versioned.
package versionstore
