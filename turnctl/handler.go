package turnctl

import "context"

// Handler carries out the control commands, one method per endpoint. The
// daemon serves a *control.Service; the Client implements Handler too, so
// the CLI runs the same code against a live daemon (over the socket) or
// against a store opened in-process (a control.Service, in `ckptfs
// turnctl-offline`).
//
// Errors the user should see are *Error; anything else is reported as an
// internal error.
type Handler interface {
	Begin(ctx context.Context, req BeginRequest) (*BeginReply, error)
	End(ctx context.Context, req EndRequest) (*EndReply, error)
	Status(ctx context.Context, req StatusRequest) (*StatusReply, error)
	Log(ctx context.Context, req LogRequest) (*LogReply, error)
	Show(ctx context.Context, req ShowRequest) (*ShowReply, error)
	Diff(ctx context.Context, req DiffRequest) (*DiffReply, error)
	// Cat returns the file's bytes in reply.Body, which the caller closes.
	Cat(ctx context.Context, req CatRequest) (*CatReply, error)
	// Tree returns the tree at the end of a turn as a tar stream in
	// reply.Body (see TreeReply), which the caller closes.
	Tree(ctx context.Context, req TreeRequest) (*TreeReply, error)
	// MountAt mounts a read-only view of a turn's tree (a daemon only).
	MountAt(ctx context.Context, req MountAtRequest) (*MountAtReply, error)
	Rewind(ctx context.Context, req RewindRequest) (*RewindReply, error)
	Undo(ctx context.Context, req UndoRequest) (*RewindReply, error)
	Restore(ctx context.Context, req RestoreRequest) (*RewindReply, error)
	Revert(ctx context.Context, req RevertRequest) (*RewindReply, error)
	Verify(ctx context.Context, req VerifyRequest) (*VerifyReply, error)
	Forget(ctx context.Context, req ForgetRequest) (*ForgetReply, error)
	Step(ctx context.Context, req StepRequest) (*StepReply, error)
	Pin(ctx context.Context, req PinRequest) (*PinReply, error)
	Unpin(ctx context.Context, req UnpinRequest) (*UnpinReply, error)
	GC(ctx context.Context, req GCRequest) (*GCReply, error)
	Policy(ctx context.Context, req PolicyRequest) (*PolicyReply, error)
	Du(ctx context.Context, req DuRequest) (*DuReply, error)
	// Progress says how far the command whose context carried
	// req.ID (WithOp) has got.
	Progress(ctx context.Context, req ProgressRequest) (*ProgressReply, error)
}
