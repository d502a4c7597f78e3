// Command turnctl marks turns in a ckptfs-mounted project and looks at,
// compares and rewinds its history. See `turnctl --help`.
package main

import "os"

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}
