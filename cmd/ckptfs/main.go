// Command ckptfs mounts the versioning overlay over a directory, unmounts
// it, and reports its status. Run `ckptfs --help`.
package main

import "os"

func main() { os.Exit(run(os.Args[1:], os.Stdout, os.Stderr)) }
