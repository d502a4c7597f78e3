// Package ui owns `turnctl ui`: a local web page over a project's history,
// served on a loopback port by the process that runs the command.
//
// The page talks to this server only; the server talks to the mount's
// daemon only through the control protocol (a turnctl.Handler, in practice
// a turnctl.Client), so the daemon stays the single owner of the store.
// What the server adds is the browser's side: a JSON API the page calls
// (api.go), the timeline laid out in lanes (lanes.go), server-sent events
// that say when a turn opened or ended (polling the daemon's status), and
// the static page itself (static/, embedded).
//
// Security (server.go): the listener binds a loopback address only; every
// request must carry the random token of the printed URL, which the first
// load trades for an HttpOnly SameSite=Strict cookie; the Host header must
// be the address bound (no DNS rebinding); state-changing requests are POST
// only and carry the page's CSRF token. The token is printed and, to open a
// browser, written into a launcher file of mode 0600 in a directory of
// mode 0700, never on a command line other users can read.
//
// The package links net/http, which the turnctl binary must not: `turnctl
// ui` hands itself over to `ckptfs turnctl-offline`, which links it.
package ui
