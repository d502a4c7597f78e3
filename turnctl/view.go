package turnctl

// MountAtRequest asks the daemon to mount a read-only view of the tree at
// the end of a turn on a directory outside the project and serve it
// beside the project (POST /v1/mount-at; `ckptfs mount --at`). The view
// stays until it is unmounted (`ckptfs umount DIR`) or the project is.
type MountAtRequest struct {
	Turn string `json:"turn"`
	Dir  string `json:"dir"` // absolute, an existing directory
}

// MountAtReply says which turn the view shows.
type MountAtReply struct {
	Turn uint64 `json:"turn"`
	Dir  string `json:"dir"`
}
