package turnctl

import "context"

// OpHeader is the request header that names a command for /v1/progress:
// a client that wants to show how far a long command (rewind, restore,
// undo, revert, gc, log) has got sends it with an ID of its choosing, and
// polls /v1/progress with that ID while it waits for the reply. The
// command's own request and reply are unchanged, so a client that does
// not care sends nothing.
const OpHeader = "Ckptfs-Op"

// ProgressRequest asks how far the command sent with OpHeader ID has got
// (POST /v1/progress).
type ProgressRequest struct {
	ID string `json:"id"`
}

// ProgressReply says what the command is doing: Running false when no
// command of that ID runs (not yet, or no longer); else its Phase
// ("rewinding", "counting lines", ...) and Done of Total steps of it
// (Total 0: not known).
type ProgressReply struct {
	Running bool   `json:"running"`
	Phase   string `json:"phase,omitempty"`
	Done    int64  `json:"done"`
	Total   int64  `json:"total"`
}

type opKey struct{}

// WithOp returns ctx carrying the command ID id: the Client sends it as
// OpHeader, the server passes it on to the Service in the context.
func WithOp(ctx context.Context, id string) context.Context {
	return context.WithValue(ctx, opKey{}, id)
}

// Op returns the command ID ctx carries ("" if none).
func Op(ctx context.Context) string {
	id, _ := ctx.Value(opKey{}).(string)
	return id
}
