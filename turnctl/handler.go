package turnctl

import "context"

// Handler carries out the control commands, one method per endpoint. The
// daemon serves a *Service; the Client implements Handler too, so the CLI
// runs the same code against a live daemon (over the socket) or against a
// store it opened itself (an in-process Service).
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
	Rewind(ctx context.Context, req RewindRequest) (*RewindReply, error)
	Undo(ctx context.Context, req UndoRequest) (*RewindReply, error)
	Restore(ctx context.Context, req RestoreRequest) (*RewindReply, error)
	Verify(ctx context.Context, req VerifyRequest) (*VerifyReply, error)
}

// Gate is what the mounted overlay offers the Service (implemented by
// *fusefs.Root; turnctl does not import fusefs).
type Gate interface {
	// Exclusive flushes the kernel's dirty pages and blocks all mutations
	// through the mount while fn runs.
	Exclusive(fn func() error) error
	// Invalidate tells the overlay that the backing tree changed at path
	// (root-relative), so it drops the kernel's caches for it.
	Invalidate(path string)
}
