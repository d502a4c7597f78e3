// Package turnctl is the control protocol of a ckptfs mount: the wire
// types, the Handler interface and a Client. The server side (Listen,
// Serve, and the Service that carries out each command on the history
// store) is the daemon's package internal/control.
//
// This package and what it imports stay small: the turnctl binary, which
// agents' hooks start at every prompt, links only it (the Client is a
// minimal HTTP/1.1 client, not net/http's) and must start in a few
// milliseconds. It must never import versionstore or Pebble; the types it
// shares with the store are in internal/ckpt (cmd/turnctl's test checks
// this).
//
// The daemon calls control.Listen, control.NewService and control.Serve; the
// turnctl command talks to it with a Client. When the project is not
// mounted, turnctl hands the command over to `ckptfs turnctl-offline`,
// which runs the same command-line code (internal/turnctlcli) on a
// control.Service in its own process, on the store it opened
// (control.OpenOffline). Client and Service both implement Handler, so the
// command-line code is the same either way.
//
// # Transport
//
// HTTP/1.1 over the mount's unix socket (its path: internal/rundir.Socket
// of the mounted directory, mode 0600). Any HTTP client works:
//
//	curl --unix-socket SOCK http://ckptfs/v1/log
//	curl --unix-socket SOCK -d '{"label":"fix tests","ref":"msg-17"}' http://ckptfs/v1/begin
//
// The host name is ignored. Only the user the daemon runs as is served: the
// server checks the peer's uid with SO_PEERCRED and answers anyone else
// 403. Each connection is served on its own goroutine; a client that
// connects and sends nothing is dropped after 10 s without holding up
// anyone else.
//
// # Requests
//
// Every endpoint is POST /v1/NAME with a JSON object as the body (at most
// 1 MiB; an empty body is the empty object). Unknown fields are an error.
// GET is accepted too, without a body, for log, status, verify, policy
// and du.
//
//	endpoint        request                                   reply
//	/v1/begin       {"label"?, "ref"?, "run"?, "join"?}       BeginReply
//	/v1/end         {"ref"?, "if_opened_by"?, "run"?}         EndReply
//	/v1/step        {"tool"?, "label"?, "if_opened_by"?,      StepReply
//	                 "turn"?, "run"?}
//	/v1/status      {"brief"?}                                StatusReply
//	/v1/log         {"n"?, "paths"?, "pickaxe"?, "grep"?,     LogReply
//	                 "programs"?}
//	/v1/show        {"turn", "patch"?}                        ShowReply
//	/v1/diff        {"from", "to"?, "paths"?}                 DiffReply
//	/v1/cat         {"turn", "path"}                          raw bytes
//	/v1/tree        {"turn", "base"?}                         tar stream
//	/v1/rewind      {"turn", "dry_run"?}                      RewindReply
//	/v1/undo        {"dry_run"?}                              RewindReply
//	/v1/restore     {"turn", "paths", "dry_run"?}             RewindReply
//	/v1/revert      {"turn", "dry_run"?, "conflicts"?}        RewindReply
//	/v1/verify      {}                                        VerifyReply
//	/v1/forget      {"turns"?, "before"?}                     ForgetReply
//	/v1/pin         {"turn", "note"?}                         PinReply
//	/v1/unpin       {"turn"}                                  UnpinReply
//	/v1/gc          {"dry_run"?}                              GCReply
//	/v1/policy      {"keep_size"?, "keep_turns"?, "keep_age"?} PolicyReply
//	/v1/du          {}                                        DuReply
//	/v1/progress    {"id"}                                    ProgressReply
//
// A turn ("turn", "from", "to") is a string: a number ("3"), "0" (the tree
// when history began) or "ref:ID" (a ref given at begin or end). For diff,
// "to" may be omitted or "now": the live tree. Paths are relative to the
// project root, slash-separated, without "." or ".." elements; "" is the
// root. A path covers everything below it. A name is bytes: a byte that
// is not part of valid UTF-8 is written, in requests and replies alike,
// as a lone low surrogate escape "\udc80" to "\udcff" (Python's
// surrogateescape: os.fsencode(json.loads(...)) gives the bytes back;
// internal/bytejson).
//
// What each command does:
//
//   - begin opens a new turn of kind agent, first closing the open turn
//     (an agent's or the automatic manual turn that collects changes made
//     while no turn is open). All writes that returned before begin belong
//     to the closed turn. Reply: the new turn, and the closed one if any.
//   - end closes the open turn, adding ref to it, and replies with the
//     turn, its stats, and a one-line summary ("turn 4 closed: 3 files
//     (+12 -4) by sed, go"). A turn that changed more than 2000 paths is
//     counted but not diffed, so that end stays fast: "lines_pending" is
//     true and log counts the lines later. No open turn: 409.
//   - status: the open turn (if any) and what it changed so far (brief:
//     the latest turn and the open one only).
//   - log: turns newest first, each with its stats (files, lines +/-) and
//     the programs that wrote.
//   - show: what one turn changed, per path; with "patch", unified diffs.
//   - diff: what differs between the end of turn "from" and the end of
//     turn "to", with unified diffs.
//   - cat: the bytes of a regular file at the end of a turn, as
//     application/octet-stream, with headers Ckptfs-Turn, Ckptfs-Mode
//     (octal) and Ckptfs-Size. Absent at that turn: 404; not a regular
//     file: 400.
//   - tree: the whole tree at the end of a turn (checkout), or with
//     "base" only what differs from the end of that turn (export), as a
//     PAX tar stream (application/x-tar, header Ckptfs-Turn): see
//     TreeReply and ReadTree for its entries and markers.
//   - mount-at: mount a read-only view of the tree at the end of a closed
//     turn on "dir" (absolute, an existing directory outside the project),
//     served by the daemon beside the project (`ckptfs mount --at`). An
//     open turn: 409; a forgotten or missing turn: 404 or 400.
//   - rewind makes the whole tree equal its state at the end of the turn,
//     recorded as a new turn of kind rewind (closing the open turn).
//     "dry_run" only reports what would change.
//   - undo undoes the last action: the newest turn that changed anything
//     and is an agent turn, a rewind or a revert (else, if there is none,
//     the newest turn that changed anything), the open turn included. With
//     no change after it, it rewinds to the turn before it; else it
//     reverts it, keeping the later (manual) turns' changes, which the
//     reply names ("kept_turns", "kept"), and refuses (409) where those
//     conflict. An undo is an action itself, so undo twice is a redo.
//     Nothing to undo: 409.
//   - restore is rewind limited to paths. A path absent both at that turn
//     and now is 404.
//   - revert undoes what one turn changed and keeps what later turns
//     changed (three-way, per path), recorded as a turn of kind revert.
//     A path changed by the turn and again later that cannot be merged
//     (or, without "conflicts": "markers", has conflicting lines): 409,
//     naming each such path, and nothing changed. "dry_run" reports what
//     it would do, conflicts included.
//   - verify checks every stored chunk and attic file; "ok" is false when
//     anything is corrupt (the reply is still 200).
//   - forget forgets the oldest kept turns: "turns" must be the turn where
//     history starts and the ones right after it ("before": every kept
//     turn before that one). History then starts at the turn after the
//     last one; every kept turn still rewinds exactly. A turn in the
//     middle of history: 400; a pinned turn, the open turn, the newest
//     closed turn, or a rewind or gc running: 409; a forgotten turn: 404.
//   - pin and unpin keep a turn from being forgotten (by forget or the
//     policy) and remove that again.
//   - gc applies the retention policy and deletes the content no kept
//     turn needs; "dry_run" reports what it would do. While a rewind or
//     another gc runs: 409.
//   - policy shows the retention policy and sets the fields given.
//   - du: the store's size against its budget, the bytes only one turn
//     references, the largest stored versions, and what gc would free.
//   - progress: how far a long command has got. A client that wants to
//     show it sends the command with the header "Ckptfs-Op: ID" (an ID of
//     its choosing: letters, digits and '-', at most 64) and, while it
//     waits, asks /v1/progress {"id": ID}: {"running", "phase", "done",
//     "total"} ("total" 0: not known). rewind, undo, restore, revert, gc
//     and log report progress; "running" is false before the command
//     starts and after it ends, and for any other ID.
//
// # Replies
//
// 200 with a JSON body (see the *Reply types; times are RFC 3339). A
// FileChange says, for one path: "kind" (added, modified, deleted, renamed
// — "from" then holds the old path — mode, type, or link: the same bytes
// and mode, but hard-linked with other paths than before), "before" and "after"
// (each {"type","mode","size","target"}, absent when the path did not
// exist), "lines_added", "lines_deleted", "binary" (not text, or larger
// than 8 MiB: no line counts) and, where asked for, "patch" in git's diff
// format. For rewind, undo, restore and revert, "before" is the state now and
// "after" the state the path is (or would be) given.
//
// # Errors
//
// Any failure is a non-200 status with the body
//
//	{"code": "not_found", "error": "no turn 9 (turns are 0-7)"}
//
// "error" is one line meant for a person; "code" is one of
//
//	bad_request  400  malformed JSON, unknown field, bad path or argument
//	forbidden    403  the peer is not the daemon's user
//	not_found    404  unknown endpoint, turn, ref, or path
//	method       405  not POST (or GET where allowed)
//	conflict     409  no open turn, ref already used, nothing to undo
//	too_large    413  request body over 1 MiB
//	corrupt      500  the store found corrupt data
//	internal     500  anything else (a bug: the daemon keeps serving)
package turnctl
