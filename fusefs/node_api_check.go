package fusefs

import "github.com/hanwen/go-fuse/v2/fs"

// node_api_check.go lists, for the compiler to check, the go-fuse
// interfaces Node and file implement, and those they leave out on purpose.

// The operations Node implements, one line each.
var (
	_ = (fs.InodeEmbedder)((*Node)(nil))
	_ = (fs.NodeOnForgetter)((*Node)(nil))
	_ = (fs.NodeLookuper)((*Node)(nil))
	_ = (fs.NodeGetattrer)((*Node)(nil))
	_ = (fs.NodeSetattrer)((*Node)(nil))
	_ = (fs.NodeReadlinker)((*Node)(nil))
	_ = (fs.NodeStatfser)((*Node)(nil))
	_ = (fs.NodeReaddirer)((*Node)(nil))
	_ = (fs.NodeMkdirer)((*Node)(nil))
	_ = (fs.NodeRmdirer)((*Node)(nil))
	_ = (fs.NodeCreater)((*Node)(nil))
	_ = (fs.NodeTmpfiler)((*Node)(nil))
	_ = (fs.NodeOpener)((*Node)(nil))
	_ = (fs.NodeMknoder)((*Node)(nil))
	_ = (fs.NodeSymlinker)((*Node)(nil))
	_ = (fs.NodeLinker)((*Node)(nil))
	_ = (fs.NodeUnlinker)((*Node)(nil))
	_ = (fs.NodeRenamer)((*Node)(nil))
	_ = (fs.NodeCopyFileRanger)((*Node)(nil))
	_ = (fs.NodeGetxattrer)((*Node)(nil))
	_ = (fs.NodeSetxattrer)((*Node)(nil))
	_ = (fs.NodeListxattrer)((*Node)(nil))
	_ = (fs.NodeRemovexattrer)((*Node)(nil))
	_ = (fs.NodeFsyncer)((*Node)(nil))
)

// The operations an open file handle implements.
var (
	_ = (fs.FileReleaser)((*file)(nil))
	_ = (fs.FileReader)((*file)(nil))
	_ = (fs.FileWriter)((*file)(nil))
	_ = (fs.FileFlusher)((*file)(nil))
	_ = (fs.FileFsyncer)((*file)(nil))
	_ = (fs.FileLseeker)((*file)(nil))
	_ = (fs.FileAllocater)((*file)(nil))
	_ = (fs.FileGetattrer)((*file)(nil))
	_ = (fs.FileGetlker)((*file)(nil))
	_ = (fs.FileSetlker)((*file)(nil))
	_ = (fs.FileSetlkwer)((*file)(nil))
)

// Not implemented, deliberately:
//   - NodeAccesser: default_permissions makes the kernel check access.
//   - NodeIoctler, NodeLseeker at node level (handles implement Lseek).
//   - FileWritever: a WRITE whose data arrives in several pieces is joined
//     by go-fuse's server and served by FileWriter.Write (rawFS wraps both
//     raw entry points, see rawfs.go).
