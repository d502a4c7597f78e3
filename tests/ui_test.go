package tests

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"ckptfs/internal/bytejson"

	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"
)

// ui_test.go: `turnctl ui` driven in a real browser (Debian's chromium,
// headless, through chromedp) against a real mount with a real history.

// startUI runs `turnctl ui --no-open` in dir (the mount) and returns the
// URL it printed. The process is killed when the test ends, before the
// unmount (it holds its cwd in the mount).
func startUI(t *testing.T, dir string) string {
	t.Helper()
	if turnctlBin == "" {
		t.Fatal("cmd/turnctl does not build")
	}
	cmd := exec.Command(turnctlBin, "ui", "--no-open")
	cmd.Dir = dir
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
	})
	urls := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if u := strings.TrimSpace(sc.Text()); strings.HasPrefix(u, "http://") {
				urls <- u
			}
		}
		close(urls)
	}()
	select {
	case u, ok := <-urls:
		if !ok {
			t.Fatalf("turnctl ui printed no URL; stderr: %s", stderr.String())
		}
		if !regexp.MustCompile(`^http://127\.0\.0\.1:\d+/\?token=[0-9a-f]{48}$`).MatchString(u) {
			t.Fatalf("turnctl ui printed %q", u)
		}
		return u
	case <-time.After(20 * time.Second):
		t.Fatalf("turnctl ui printed no URL in 20 s; stderr: %s", stderr.String())
	}
	return ""
}

// openUI starts turnctl ui on mount m, loads its page in a browser and
// waits until the page is ready.
func openUI(t *testing.T, m *Mount) context.Context {
	t.Helper()
	url := startUI(t, m.Dir)
	ctx := browser(t)
	do(t, ctx, "load the page",
		chromedp.Navigate(url),
		chromedp.WaitVisible(chromedp.CSS(`body[data-ready="1"]`)))
	return ctx
}

// browser starts headless chromium and returns a chromedp context on a
// tab of it; it is closed when the test ends. Without chromium the test
// fails: CI installs it (.ci/run).
func browser(t *testing.T) context.Context {
	t.Helper()
	exe := ""
	for _, name := range []string{"chromium", "chromium-browser"} {
		if p, err := exec.LookPath(name); err == nil {
			exe = p
			break
		}
	}
	if exe == "" {
		t.Fatal("chromium is not installed: the browser tests need it (apt-get install chromium; .ci/run installs it)")
	}
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(exe),
		chromedp.NoSandbox, // root in a container
		chromedp.Headless,
		chromedp.DisableGPU,
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1400, 900),
	)
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancelTab := chromedp.NewContext(actx)
	ctx, cancelTime := context.WithTimeout(ctx, 3*time.Minute)
	t.Cleanup(func() {
		cancelTime()
		cancelTab()
		cancelAlloc()
	})
	if err := chromedp.Do(ctx); err != nil {
		t.Fatalf("starting %s: %v", exe, err)
	}
	return ctx
}

// do runs chromedp steps and fails the test with what it was doing.
func do(t *testing.T, ctx context.Context, what string, steps ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	if err := chromedp.Do(ctx, steps...); err != nil {
		t.Fatalf("browser: %s: %v", what, err)
	}
}

// click is chromedp.Click of the first node sel matches, queried again
// when the page redrew that node between the query and the click (a
// timeline update: "Could not find node with given id"), which is then
// never sent.
func click(sel string) chromedp.Action[chromedp.Void] {
	return func(ctx context.Context, tg *chromedp.Target) (chromedp.Void, error) {
		for try := 1; ; try++ {
			v, err := chromedp.Click(chromedp.CSS(sel))(ctx, tg)
			if err == nil || try == 5 || !strings.Contains(err.Error(), "Could not find node with given id") {
				return v, err
			}
		}
	}
}

// searchResults waits for the search just started to answer and returns
// the turns it lists, top down ("3 2"), or "none".
func searchResults(t *testing.T, ctx context.Context) string {
	t.Helper()
	return get(t, ctx, "the search results", chromedp.Poll[string](`document.querySelector("#results-count").textContent ?
		[...document.querySelectorAll("#results-list .row")].map(r => r.dataset.turn).join(" ") || "none" : false`))
}

// get runs one chromedp action and returns its value.
func get[T any](t *testing.T, ctx context.Context, what string, a chromedp.Action[T]) T {
	t.Helper()
	v, err := chromedp.Run(ctx, a)
	if err != nil {
		t.Fatalf("browser: %s: %v", what, err)
	}
	return v
}

// timelineRows returns the turn numbers of the timeline's rows, top down.
func timelineRows(t *testing.T, ctx context.Context) []string {
	t.Helper()
	return get(t, ctx, "read the timeline", chromedp.Evaluate[[]string](`[...document.querySelectorAll("#timeline .row")].map(r => r.dataset.turn)`))
}

// col is the lane column of turn n's row.
func col(t *testing.T, ctx context.Context, n int) string {
	t.Helper()
	return get(t, ctx, "read a lane", chromedp.AttributeValue(chromedp.CSS(fmt.Sprintf(`#timeline .row[data-turn="%d"] svg`, n)), "data-col")).Value
}

// TestUIBrowser: the page shows the history's turns and the branch a
// rewind made, a click shows a turn's diff, a rewind made from the page
// leaves the tree exactly as `turnctl rewind` does, and a turn that ends
// appears without a reload.
func TestUIBrowser(t *testing.T) {
	dir := t.TempDir()
	m := mountProject(t, dir)
	runIn(t, m.Dir, `
T=`+turnctlBin+`
$T begin --label "add main" >/dev/null
printf 'package main\n\nfunc main() {\n\tprintln("hi") // greet\n}\n' > main.go
mkdir -p lib; printf 'one\ntwo\n' > lib/util.txt
$T end >/dev/null
$T begin --label "$(printf 'edit main\n\nSay hello instead of hi.')" >/dev/null
sed -i 's/"hi"/"hello"/' main.go
$T step --tool Edit --label main.go >/dev/null
chmod 0600 lib/util.txt; ln -s main.go link; echo readme > README
$T end >/dev/null
$T rewind 1 >/dev/null
$T begin --label "another way" >/dev/null
echo x > x.txt; chmod 0755 x.txt
$T end >/dev/null
`)
	ctx := openUI(t, m)

	// The timeline: 4 (current) and 3 (the rewind to 1) on the main lane,
	// 2 on a branch of its own.
	if got := strings.Join(timelineRows(t, ctx), " "); got != "4 3 2 1 0" {
		t.Fatalf("timeline rows %q, want 4 3 2 1 0", got)
	}
	current := get(t, ctx, "the current row", chromedp.Evaluate[string](`[...document.querySelectorAll("#timeline .row.current")].map(r => r.dataset.turn).join(",")`))
	label3 := get(t, ctx, "turn 3's label", chromedp.Text(chromedp.CSS(`#timeline .row[data-turn="3"] .label`)))
	col4, col3, col2, col1 := col(t, ctx, 4), col(t, ctx, 3), col(t, ctx, 2), col(t, ctx, 1)
	if current != "4" || label3 != "rewind to 1" {
		t.Errorf("current row %q, turn 3's label %q", current, label3)
	}
	if col4 != col3 || col3 != col1 || col2 == col4 {
		t.Errorf("lanes: 4:%s 3:%s 2:%s 1:%s; want 2 on a branch of its own", col4, col3, col2, col1)
	}

	// A click on turn 2, then on main.go: its diff.
	do(t, ctx, "show turn 2's diff of main.go",
		click(`#timeline .row[data-turn="2"]`),
		chromedp.WaitVisible(chromedp.CSS(`#turn-head[data-turn="2"]`)),
		click(`#files .file[data-path="main.go"]`),
		chromedp.WaitVisible(chromedp.CSS(`#diff[data-path="main.go"] pre`)))
	steps := get(t, ctx, "turn 2's steps", chromedp.Text(chromedp.CSS(`#steps`)))
	for _, want := range []string{"2 steps", "2.1", "Edit", "main.go", "2.2"} {
		if !strings.Contains(steps, want) {
			t.Errorf("turn 2's steps lack %q:\n%s", want, steps)
		}
	}
	diff := get(t, ctx, "the diff", chromedp.Text(chromedp.CSS(`#diff`)))
	for _, want := range []string{"-\tprintln(\"hi\") // greet", "+\tprintln(\"hello\") // greet", "@@ -1,5 +1,5 @@"} {
		if !strings.Contains(diff, want) {
			t.Errorf("diff of main.go in turn 2 lacks %q:\n%s", want, diff)
		}
	}
	do(t, ctx, "side by side",
		click(`#view-toggle`),
		chromedp.WaitVisible(chromedp.CSS(`#diff[data-path="main.go"] table`)))
	split := get(t, ctx, "the side-by-side diff", chromedp.Text(chromedp.CSS(`#diff table`)))
	if !strings.Contains(split, `println("hi") // greet`) || !strings.Contains(split, `println("hello") // greet`) {
		t.Errorf("side-by-side diff:\n%s", split)
	}
	patch := get(t, ctx, "turn 2's patch", chromedp.Evaluate[string](`fetch(document.querySelector("#dl-patch").href).then(r => r.text())`, chromedp.EvalAwaitPromise))
	if !strings.Contains(patch, "+\tprintln(\"hello\") // greet") || !strings.Contains(patch, "new file mode 120000") {
		t.Errorf("turn 2's patch:\n%s", patch)
	}
	prompt := get(t, ctx, "turn 2's prompt", chromedp.TextContent(chromedp.CSS(`#prompt pre`)))
	if prompt != "edit main\n\nSay hello instead of hi." {
		t.Errorf("turn 2's full prompt %q", prompt)
	}

	// Search: -S, then main.go's history.
	do(t, ctx, "search -S hello",
		chromedp.SetValue(chromedp.CSS(`#q-s`), "hello"),
		click(`#search button[type="submit"]`))
	if got := searchResults(t, ctx); got != "3 2" {
		t.Errorf("-S hello found turns %q, want 3 2", got)
	}
	do(t, ctx, "main.go's history",
		click(`#q-clear`),
		click(`#file-history`))
	if got := searchResults(t, ctx); got != "3 2 1" {
		t.Errorf("main.go's history: turns %q, want 3 2 1", got)
	}

	// Pin turn 2 with a note, from the page.
	do(t, ctx, "pin turn 2",
		click(`#act-pin`),
		chromedp.WaitVisible(chromedp.CSS(`#pin-note`)),
		chromedp.SetValue(chromedp.CSS(`#pin-note`), "known good"),
		click(`#dialog-confirm`),
		chromedp.WaitVisible(chromedp.CSS(`#timeline .row[data-turn="2"] .badge.pin`)))
	if out := turnctlOK(t, m.Dir, "log", "-n", "3"); !strings.Contains(out, "[pinned: known good]") {
		t.Errorf("turn 2 not pinned with its note:\n%s", out)
	}

	// gc: its preview, then cancelled.
	do(t, ctx, "preview a gc",
		click(`#act-gc`),
		chromedp.WaitVisible(chromedp.CSS(`#gc-preview`)))
	if gc := get(t, ctx, "the gc preview", chromedp.Text(chromedp.CSS(`#gc-preview`))); !strings.Contains(gc, "Forgets no turn.") || !strings.Contains(gc, "Frees ") {
		t.Errorf("gc preview: %q", gc)
	}
	do(t, ctx, "cancel the gc",
		click(`#dialog-cancel`),
		chromedp.WaitNotVisible(chromedp.CSS(`#dialog`)))

	shot := filepath.Join(t.TempDir(), "ui.png")
	png := get(t, ctx, "screenshot", chromedp.CaptureScreenshot())
	if err := os.WriteFile(shot, png, 0o644); err != nil {
		t.Fatal(err)
	}
	if d := os.Getenv("CKPTFS_UI_SCREENSHOT"); d != "" {
		os.WriteFile(d, png, 0o644)
	}
	if len(png) < 10000 {
		t.Errorf("screenshot of %d bytes", len(png))
	}

	// What `turnctl rewind 2` leaves, then back to 4.
	before := snapshot(t, m.Dir, nil, nil)
	turnctlOK(t, m.Dir, "rewind", "2")
	want := snapshot(t, m.Dir, nil, nil)
	turnctlOK(t, m.Dir, "rewind", "4")
	if diff := treeDiff(before, snapshot(t, m.Dir, nil, nil)); diff != "" {
		t.Fatalf("rewind 2 then 4 did not come back:\n%s", diff)
	}
	// Two new turns: the page shows them without a reload.
	do(t, ctx, "see turn 6", chromedp.WaitVisible(chromedp.CSS(`#timeline .row[data-turn="6"].current`)))

	// The same rewind from the page: preview, then confirm.
	do(t, ctx, "rewind to 2 from the page",
		click(`#timeline .row[data-turn="2"]`),
		chromedp.WaitVisible(chromedp.CSS(`#turn-head[data-turn="2"] #act-rewind`)),
		click(`#act-rewind`),
		chromedp.WaitVisible(chromedp.CSS(`#dialog-confirm`)))
	preview := get(t, ctx, "the preview", chromedp.Text(chromedp.CSS(`#dialog-body`)))
	for _, w := range []string{"main.go", "README", "x.txt", "link"} {
		if !strings.Contains(preview, w) {
			t.Errorf("the rewind's preview does not name %s:\n%s", w, preview)
		}
	}
	if diff := treeDiff(before, snapshot(t, m.Dir, nil, nil)); diff != "" {
		t.Fatalf("the preview changed the tree:\n%s", diff)
	}
	do(t, ctx, "confirm",
		click(`#dialog-confirm`),
		chromedp.WaitVisible(chromedp.CSS(`#timeline .row[data-turn="7"].current`)))
	if diff := treeDiff(want, snapshot(t, m.Dir, nil, nil)); diff != "" {
		t.Errorf("the page's rewind to 2 left another tree than turnctl rewind 2:\n%s", diff)
	}
	if out := turnctlOK(t, m.Dir, "log", "-n", "1"); !strings.Contains(out, "rewind to 2") {
		t.Errorf("turn 7 is not a rewind to 2: %s", out)
	}
	// The toast counts files as the turn's row does, .git's apart.
	toastText := get(t, ctx, "the toast", chromedp.Text(chromedp.CSS(`#toast`)))
	files7 := get(t, ctx, "turn 7's files", chromedp.Text(chromedp.CSS(`#timeline .row[data-turn="7"] .files`)))
	if !strings.HasSuffix(toastText, ": "+files7) {
		t.Errorf("the toast says %q, turn 7's row %q", toastText, files7)
	}

	// A turn begun and ended outside the page appears in it, no reload.
	get(t, ctx, "mark the page", chromedp.Evaluate[bool](`window.notReloaded = true`))
	turnctlOK(t, m.Dir, "begin", "--label", "live turn")
	if err := os.WriteFile(filepath.Join(m.Dir, "live.txt"), []byte("live\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	turnctlOK(t, m.Dir, "end")
	do(t, ctx, "see the live turn", chromedp.WaitVisible(chromedp.CSS(`#timeline .row[data-turn="8"].current`)))
	liveLabel := get(t, ctx, "the live turn's label", chromedp.Text(chromedp.CSS(`#timeline .row[data-turn="8"] .label`)))
	notReloaded := get(t, ctx, "the page's mark", chromedp.Evaluate[bool](`window.notReloaded === true`))
	if liveLabel != "live turn" || !notReloaded {
		t.Errorf("live turn: label %q, page not reloaded: %v", liveLabel, notReloaded)
	}
	if got := strings.Join(timelineRows(t, ctx), " "); got != "8 7 6 5 4 3 2 1 0" {
		t.Errorf("timeline rows after the live turn %q", got)
	}

	// A turn forgotten in the middle, elsewhere: the page drops it without
	// a reload, and the turn it was merged into says so.
	turnctlOK(t, m.Dir, "forget", "5")
	do(t, ctx, "see turn 5 go", chromedp.WaitNotPresent(chromedp.CSS(`#timeline .row[data-turn="5"]`)))
	label := get(t, ctx, "turn 6's label", chromedp.Text(chromedp.CSS(`#timeline .row[data-turn="6"] .label`)))
	notReloaded = get(t, ctx, "the page's mark", chromedp.Evaluate[bool](`window.notReloaded === true`))
	if !strings.HasPrefix(label, "[with turn 5]") || !notReloaded {
		t.Errorf("turn 6, which turn 5 was merged into, is labelled %q; page not reloaded: %v", label, notReloaded)
	}
}

// treeDiff lists the paths whose state differs between two snapshots.
func treeDiff(a, b map[string]entry) string {
	var out []string
	for p, ea := range a {
		if eb, ok := b[p]; !ok {
			out = append(out, fmt.Sprintf("%s: %v, then gone", p, ea))
		} else if ea != eb {
			out = append(out, fmt.Sprintf("%s: %v, then %v", p, ea, eb))
		}
	}
	for p, eb := range b {
		if _, ok := a[p]; !ok {
			out = append(out, fmt.Sprintf("%s: new %v", p, eb))
		}
	}
	return strings.Join(out, "\n")
}

// TestUIRefusesAddr: turnctl ui listens on a loopback address only, and
// serves a mount only.
func TestUIRefusesAddr(t *testing.T) {
	m := mountProject(t, t.TempDir())
	for _, addr := range []string{"0.0.0.0:0", ":8700", "192.0.2.1:0"} {
		turnctlFails(t, m.Dir, 2, "is not a loopback address", "ui", "--no-open", "--addr", addr)
	}
	turnctlFails(t, t.TempDir(), 1, "is not mounted", "ui", "--no-open")
}

// A turnctl ui left running in the project keeps the umount busy: the
// refusal names it as turnctl ui, not as the ckptfs binary serving it.
func TestUmountNamesTheUIThatHoldsIt(t *testing.T) {
	m := mountProject(t, t.TempDir())
	startUI(t, m.Dir)
	refused(t, []string{m.Dir + " is in use by", "turnctl ui --no-open"}, "umount", m.Dir)
}

// TestUIOpenTurnShownEnds: the open turn shown on the right is shown
// again when it ends: before, the pane kept saying "open" and its first
// files while the timeline's row had long been closed with more.
func TestUIOpenTurnShownEnds(t *testing.T) {
	m := mountProject(t, t.TempDir())
	turnctlOK(t, m.Dir, "begin", "--label", "still working")
	if err := os.WriteFile(filepath.Join(m.Dir, "a.txt"), []byte("a\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx := openUI(t, m)
	do(t, ctx, "show the open turn",
		click(`#timeline .row[data-turn="1"]`),
		chromedp.WaitVisible(chromedp.CSS(`#diff[data-path="a.txt"] pre`)))
	if meta := get(t, ctx, "its head", chromedp.Text(chromedp.CSS(`#turn-head .meta`))); !strings.Contains(meta, "open") {
		t.Fatalf("the open turn's head says %q", meta)
	}
	if err := os.WriteFile(filepath.Join(m.Dir, "b.txt"), []byte("b\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	turnctlOK(t, m.Dir, "end")
	do(t, ctx, "see it end in the timeline",
		chromedp.WaitNotPresent(chromedp.CSS(`#timeline .row[data-turn="1"] .badge.open`)))
	wctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	do(t, wctx, "see it end on the right",
		chromedp.WaitVisible(chromedp.CSS(`#files .file[data-path="b.txt"]`)),
		chromedp.WaitVisible(chromedp.CSS(`#diff[data-path="a.txt"] pre`)))
	if meta := get(t, ctx, "its head", chromedp.Text(chromedp.CSS(`#turn-head .meta`))); strings.Contains(meta, "open") || !strings.Contains(meta, "2 files") {
		t.Errorf("the ended turn's head says %q, want it closed with 2 files", meta)
	}
}

// TestUIHugeDiffCut: a file's diff of tens of thousands of lines (a
// generated file) is drawn cut, with a button for the rest: drawn whole,
// 200,000 lines kept the page from answering for 7 s, side by side for
// longer.
func TestUIHugeDiffCut(t *testing.T) {
	m := mountProject(t, t.TempDir())
	var b strings.Builder
	for i := range 20000 {
		fmt.Fprintf(&b, "generated line %d\n", i)
	}
	turnctlOK(t, m.Dir, "begin", "--label", "generate")
	if err := os.WriteFile(filepath.Join(m.Dir, "gen.txt"), []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	turnctlOK(t, m.Dir, "end")
	ctx := openUI(t, m)
	do(t, ctx, "show gen.txt's diff",
		click(`#timeline .row[data-turn="1"]`),
		chromedp.WaitVisible(chromedp.CSS(`#diff[data-path="gen.txt"] pre`)))
	lines := func() int {
		t.Helper()
		return get(t, ctx, "count the diff's lines", chromedp.Evaluate[int](`document.querySelectorAll("#diff .l").length`))
	}
	if n := lines(); n > 5000 {
		t.Errorf("the page drew %d lines of the diff at once", n)
	}
	if cut := get(t, ctx, "the cut's note", chromedp.Evaluate[string](`document.querySelector("#diff-cut")?.textContent ?? ""`)); !strings.Contains(cut, "first 5000 of 20005 lines") {
		t.Fatalf("the cut says %q", cut)
	}
	do(t, ctx, "show all", click(`#diff-all`), chromedp.WaitNotPresent(chromedp.CSS(`#diff-cut`)))
	if n := lines(); n != 20005 {
		t.Errorf("show all drew %d lines, want 20005", n)
	}
	if last := get(t, ctx, "the last line", chromedp.Evaluate[string](`[...document.querySelectorAll("#diff .l")].pop().textContent`)); last != "+generated line 19999" {
		t.Errorf("the last line drawn is %q", last)
	}
}

// TestUIOddNames: names with a newline, a tab or another control
// character (DEL too) are quoted with Go's escapes as turnctl quotes
// them (drawn as they are, on one line, "a\nb.txt" read as a file
// "a b.txt", and a DEL is not seen at all), so is a byte that is not
// UTF-8, each shows its own diff, and names and labels made of markup
// stay text.
func TestUIOddNames(t *testing.T) {
	m := mountProject(t, t.TempDir())
	names := []string{"a b.txt", "a\nb.txt", "a\tb.txt", "a\x01b.txt", "a\x7fb.txt", "<img src=x onerror=window.xss=1>.txt", "ünï 文件.txt", "caf\xe9.txt"}
	turnctlOK(t, m.Dir, "begin", "--label", `<script>window.xss=2</script><img src=x onerror=window.xss=3>`)
	for i, n := range names {
		if err := os.WriteFile(filepath.Join(m.Dir, n), []byte(fmt.Sprintf("file %d\n", i)), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	turnctlOK(t, m.Dir, "end")
	ctx := openUI(t, m)
	do(t, ctx, "show the turn",
		click(`#timeline .row[data-turn="1"]`),
		chromedp.WaitVisible(chromedp.CSS(`#files .file`)))
	got := get(t, ctx, "the file list", chromedp.Evaluate[[]string](`[...document.querySelectorAll("#files .file .p")].map(e => e.innerText)`))
	want := []string{"<img src=x onerror=window.xss=1>.txt", `"a\x01b.txt"`, `"a\tb.txt"`, `"a\nb.txt"`, "a b.txt", `"a\x7fb.txt"`, `"caf\xe9.txt"`, "ünï 文件.txt"}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("the file list reads %q, want %q", got, want)
	}
	for i, n := range names {
		q, _ := bytejson.Marshal(n) // a byte that is not UTF-8: a lone surrogate, as the page has it
		get(t, ctx, "show "+n, chromedp.Evaluate[bool](fmt.Sprintf(`[...document.querySelectorAll("#files .file")].find(e => e.dataset.path === %s).click() || true`, q)))
		diff := get(t, ctx, "the diff of "+n, chromedp.Poll[string](fmt.Sprintf(`document.querySelector("#diff").dataset.path === %s && document.querySelector("#diff pre.unified")?.textContent`, q)))
		if !strings.Contains(diff, fmt.Sprintf("+file %d", i)) {
			t.Errorf("the diff of %q:\n%s", n, diff)
		}
	}
	// The last name shown is not UTF-8: its history is turn 1, and
	// restoring it as before turn 1 removes that file, and only it.
	do(t, ctx, "the history of "+names[len(names)-1], click(`#file-history`))
	if got := searchResults(t, ctx); got != "1" {
		t.Errorf("the history of %q: turns %q, want 1", names[len(names)-1], got)
	}
	do(t, ctx, "restore "+names[len(names)-1], click(`#act-restore`))
	if got := get(t, ctx, "the preview or an error", chromedp.Poll[string](`document.querySelector("#dialog").open ? "preview" :
		document.querySelector("#toast.error:not([hidden])")?.textContent ?? false`)); got != "preview" {
		t.Fatalf("restoring %q: %s", names[len(names)-1], got)
	}
	do(t, ctx, "confirm",
		click(`#dialog-confirm`),
		chromedp.WaitVisible(chromedp.CSS(`#timeline .row[data-turn="2"].current`)))
	for i, n := range names {
		_, err := os.Stat(filepath.Join(m.Dir, n))
		if gone := os.IsNotExist(err); gone != (i == len(names)-1) {
			t.Errorf("after restoring %q: %q: %v", names[len(names)-1], n, err)
		}
	}
	label := get(t, ctx, "the label", chromedp.Text(chromedp.CSS(`#timeline .row[data-turn="1"] .label`)))
	xss := get(t, ctx, "window.xss", chromedp.Evaluate[bool](`window.xss !== undefined`))
	if !strings.HasPrefix(label, "<script>") || xss {
		t.Errorf("label %q, a script ran: %v", label, xss)
	}
}

// TestUIStepRewindContinues: a rewind to a step continues from that
// step, not from its turn's end, and the page says so.
func TestUIStepRewindContinues(t *testing.T) {
	m := mountProject(t, t.TempDir())
	runIn(t, m.Dir, `
T=`+turnctlBin+`
$T begin --label "two steps" >/dev/null
echo one > a.txt
$T step --tool Write --label a.txt >/dev/null
echo two > b.txt
$T end >/dev/null
$T begin --label "later" >/dev/null
echo three > c.txt
$T end >/dev/null
$T rewind 1.1 >/dev/null
`)
	ctx := openUI(t, m)
	do(t, ctx, "show the rewind",
		click(`#timeline .row[data-turn="3"]`),
		chromedp.WaitVisible(chromedp.CSS(`#turn-head[data-turn="3"]`)))
	if meta := get(t, ctx, "its head", chromedp.Text(chromedp.CSS(`#turn-head .meta`))); !strings.HasSuffix(meta, "continues from step 1.1") {
		t.Errorf("the rewind to 1.1 says %q, want it to continue from step 1.1", meta)
	}
}

// TestUISearchError: a search that fails says why, and not beside the
// count of the search before it ("(2 turns)" over "bad --grep pattern").
func TestUISearchError(t *testing.T) {
	m := mountProject(t, t.TempDir())
	runIn(t, m.Dir, `
T=`+turnctlBin+`
$T begin --label "needle one" >/dev/null; echo needle > a.txt; $T end >/dev/null
$T begin --label "needle two" >/dev/null; echo needle > b.txt; $T end >/dev/null
`)
	ctx := openUI(t, m)
	do(t, ctx, "search -S needle",
		chromedp.SetValue(chromedp.CSS(`#q-s`), "needle"),
		click(`#search button[type="submit"]`),
		chromedp.WaitVisible(chromedp.CSS(`#results-list .row`)))
	if n := get(t, ctx, "the count", chromedp.Text(chromedp.CSS(`#results-count`))); n != "(2 turns)" {
		t.Fatalf("-S needle: count %q", n)
	}
	do(t, ctx, "search a bad --grep",
		click(`#q-clear`),
		chromedp.SetValue(chromedp.CSS(`#q-grep`), "("),
		click(`#search button[type="submit"]`))
	msg := get(t, ctx, "the error", chromedp.Poll[string](`document.querySelector("#results-list").textContent.includes("bad --grep") && document.querySelector("#results-list").textContent`))
	if n := get(t, ctx, "the count", chromedp.TextContent(chromedp.CSS(`#results-count`))); n != "" {
		t.Errorf("the error %q is shown under the count %q", msg, n)
	}
}

// threeStepsTurn is a shell script (turnctl in $T) of a turn of three
// steps: a.txt written, then edited and b.txt added, then b.txt made
// executable.
const threeStepsTurn = `$T begin --label "three steps" >/dev/null
printf 'one\n' > a.txt
$T step --tool Write --label a.txt >/dev/null
printf 'one\ntwo\n' > a.txt; echo b > b.txt
$T step --tool Bash --label "edit a, add b" >/dev/null
chmod 0755 b.txt
$T end >/dev/null
`

// TestUIStepChanges: a click on a step shows that step's own changes
// (turnctl show N.K), each file's diff from the step before, and the
// turn's again on asking.
func TestUIStepChanges(t *testing.T) {
	m := mountProject(t, t.TempDir())
	runIn(t, m.Dir, "T="+turnctlBin+"\n"+threeStepsTurn)
	ctx := openUI(t, m)
	do(t, ctx, "show turn 1",
		click(`#timeline .row[data-turn="1"]`),
		chromedp.WaitVisible(chromedp.CSS(`#steps .step[data-step="1.2"]`)))
	wctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	do(t, wctx, "show step 1.2",
		click(`#steps .step[data-step="1.2"] .tool`),
		chromedp.WaitVisible(chromedp.CSS(`#steps .step.selected[data-step="1.2"]`)),
		chromedp.WaitVisible(chromedp.CSS(`#diff[data-path="a.txt"] pre`)))
	files := func() string {
		t.Helper()
		return get(t, ctx, "the files", chromedp.Evaluate[string](`[...document.querySelectorAll("#files .file")].map(e => e.dataset.path + ":" + e.querySelector(".k").textContent).join(" ")`))
	}
	if got := files(); got != "a.txt:modified b.txt:added" {
		t.Errorf("step 1.2's files: %s", got)
	}
	diff := get(t, ctx, "a.txt's diff in step 1.2", chromedp.Text(chromedp.CSS(`#diff`)))
	if !strings.Contains(diff, "@@ -1 +1,2 @@") || !strings.Contains(diff, "+two") || strings.Contains(diff, "+one") {
		t.Errorf("a.txt's diff in step 1.2:\n%s", diff)
	}
	if title := get(t, ctx, "the changes' title", chromedp.Text(chromedp.CSS(`#changes-title`))); !strings.Contains(title, "2 changes in step 1.2") {
		t.Errorf("the changes' title %q", title)
	}
	head := get(t, ctx, "the turn's head", chromedp.Text(chromedp.CSS(`#turn-head .meta`)))
	if !strings.Contains(head, "2 files +3 -0") {
		t.Errorf("the turn's head, with step 1.2 shown: %q", head)
	}
	do(t, ctx, "show step 1.3", click(`#steps .step[data-step="1.3"] .num`),
		chromedp.WaitVisible(chromedp.CSS(`#steps .step.selected[data-step="1.3"]`)),
		chromedp.WaitVisible(chromedp.CSS(`#diff[data-path="b.txt"] pre`)))
	if got := files(); got != "b.txt:mode" {
		t.Errorf("step 1.3's files: %s", got)
	}
	do(t, ctx, "back to the whole turn", click(`#whole-turn`),
		chromedp.WaitNotPresent(chromedp.CSS(`#steps .step.selected`)),
		chromedp.WaitVisible(chromedp.CSS(`#diff[data-path="a.txt"] pre`)))
	if got := files(); got != "a.txt:added b.txt:added" {
		t.Errorf("turn 1's files: %s", got)
	}
}

// TestUISideBySideModes: side by side, a change of mode shows as it does
// unified: "old mode"/"new mode" and ckptfs's note of a mode git cannot
// hold span the columns. Before, the first were dropped (a chmod +x drew
// an empty table) and the note drew as a line of the file, numbered 0,
// its "#" cut off.
func TestUISideBySideModes(t *testing.T) {
	m := mountProject(t, t.TempDir())
	runIn(t, m.Dir, `
echo x > run.sh; echo s > secret.txt
T=`+turnctlBin+`
$T begin --label modes >/dev/null
chmod 0755 run.sh; chmod 0600 secret.txt
$T end >/dev/null
`)
	ctx := openUI(t, m)
	do(t, ctx, "show run.sh side by side",
		click(`#timeline .row[data-turn="2"]`),
		chromedp.WaitVisible(chromedp.CSS(`#diff[data-path="run.sh"] pre`)),
		click(`#view-toggle`),
		chromedp.WaitVisible(chromedp.CSS(`#diff[data-path="run.sh"] table`)))
	if got := get(t, ctx, "run.sh's table", chromedp.TextContent(chromedp.CSS(`#diff table`))); !strings.Contains(got, "old mode 100644") || !strings.Contains(got, "new mode 100755") {
		t.Errorf("run.sh side by side: %q", got)
	}
	do(t, ctx, "show secret.txt side by side",
		click(`#files .file[data-path="secret.txt"]`),
		chromedp.WaitVisible(chromedp.CSS(`#diff[data-path="secret.txt"] table`)))
	got := get(t, ctx, "secret.txt's table", chromedp.Evaluate[[]string](`[...document.querySelectorAll("#diff table tr")].map(r => r.textContent)`))
	if len(got) != 1 || !strings.HasPrefix(got[0], "# ckptfs: mode of secret.txt 0644 -> 0600") {
		t.Errorf("secret.txt side by side: %q", got)
	}
}

// TestUIDiffLinesLikeHeaders: inside a hunk a line is what its first
// character says. A deleted "-- comment" (SQL, Lua) reads "--- comment"
// and an added "++i" "+++i", as git's file headers do: they were drawn
// as headers, and side by side dropped or spanning the columns, the
// line numbers after them one off.
func TestUIDiffLinesLikeHeaders(t *testing.T) {
	m := mountProject(t, t.TempDir())
	runIn(t, m.Dir, `
printf -- '-- old comment\nkeep\n' > q.sql
T=`+turnctlBin+`
$T begin --label edit >/dev/null
printf -- 'keep\n++i\n' > q.sql
$T end >/dev/null
`)
	ctx := openUI(t, m)
	do(t, ctx, "show q.sql",
		click(`#timeline .row[data-turn="2"]`),
		chromedp.WaitVisible(chromedp.CSS(`#diff[data-path="q.sql"] pre`)))
	spans := get(t, ctx, "the unified lines", chromedp.Evaluate[[]string](`[...document.querySelectorAll("#diff pre.unified .l")].filter(e => !e.classList.contains("m")).map(e => e.className.slice(2) + ":" + e.textContent)`))
	if want := "h:@@ -1,2 +1,2 @@|d:--- old comment|: keep|a:+++i"; strings.Join(spans, "|") != want {
		t.Errorf("unified: %q, want %q", strings.Join(spans, "|"), want)
	}
	do(t, ctx, "side by side",
		click(`#view-toggle`),
		chromedp.WaitVisible(chromedp.CSS(`#diff[data-path="q.sql"] table`)))
	rows := get(t, ctx, "the rows", chromedp.Evaluate[[]string](`[...document.querySelectorAll("#diff table tr")].map(r => [...r.cells].map(c => c.textContent).join("|"))`))
	if want := "@@ -1,2 +1,2 @@;1|-- old comment||;2|keep|1|keep;||2|++i"; strings.Join(rows, ";") != want {
		t.Errorf("side by side: %q, want %q", strings.Join(rows, ";"), want)
	}
}

// TestUISearchAbsolutePath: a path searched for as an absolute path in
// the project (as pasted from a terminal) finds its history, as the
// same path relative to the project does; one outside the project says
// so. Before, the page looked for "tmp/.../main.go" in the project and
// answered "no turn matches".
func TestUISearchAbsolutePath(t *testing.T) {
	m := mountProject(t, t.TempDir())
	runIn(t, m.Dir, `
T=`+turnctlBin+`
$T begin --label one >/dev/null; mkdir lib; echo a > lib/a.txt; $T end >/dev/null
$T begin --label two >/dev/null; echo b > b.txt; $T end >/dev/null
$T begin --label three >/dev/null; echo aa > lib/a.txt; $T end >/dev/null
`)
	ctx := openUI(t, m)
	search := func(path string) string {
		t.Helper()
		do(t, ctx, "search "+path,
			click(`#q-clear`),
			chromedp.SetValue(chromedp.CSS(`#q-path`), path),
			click(`#search button[type="submit"]`))
		return get(t, ctx, "the results of "+path, chromedp.Poll[string](`(() => {
			const l = document.querySelector("#results-list");
			if (l.textContent.includes("searching")) return false;
			const rows = [...l.querySelectorAll(".row")].map(r => r.dataset.turn);
			return rows.length ? rows.join(" ") : l.textContent;
		})()`))
	}
	for _, p := range []string{"lib/a.txt", filepath.Join(m.Dir, "lib/a.txt"), filepath.Join(m.Dir, "lib") + "/", filepath.Join(m.Dir, "x/../lib/a.txt")} {
		if got := search(p); got != "3 1" {
			t.Errorf("path %q: %q, want turns 3 1", p, got)
		}
	}
	if got := search(m.Dir); got != "3 2 1" {
		t.Errorf("the project's root: %q, want turns 3 2 1", got)
	}
	outside := filepath.Join(filepath.Dir(m.Dir), "elsewhere.txt")
	if got := search(outside); got != outside+" is outside the project "+m.Dir+": give a path inside it, or one relative to it" {
		t.Errorf("a path outside the project: %q", got)
	}
	if n := get(t, ctx, "the count", chromedp.TextContent(chromedp.CSS(`#results-count`))); n != "" {
		t.Errorf("the refusal is shown under the count %q", n)
	}
}

// changedPaths lists, sorted, the paths whose state differs between two
// snapshots.
func changedPaths(a, b map[string]entry) []string {
	var out []string
	for p, ea := range a {
		if eb, ok := b[p]; !ok || ea != eb {
			out = append(out, p)
		}
	}
	for p := range b {
		if _, ok := a[p]; !ok {
			out = append(out, p)
		}
	}
	slices.Sort(out)
	return out
}

// TestUIRestoreRename: "Restore as before this turn" on a rename row puts
// the rename back: the old name with its bytes from before the turn, the
// new name as it was (absent: removed), even where a later turn removed
// the new name. Before, only the old name was restored, and the file was
// left under both names. A modified, an added and a deleted file's rows
// restore their one path, as before.
func TestUIRestoreRename(t *testing.T) {
	m := mountProject(t, t.TempDir())
	runIn(t, m.Dir, `
T=`+turnctlBin+`
$T begin --label setup >/dev/null
printf 'old a\n' > a.txt; printf 'c\n' > c.txt; printf 'm\n' > m.txt; printf 'd\n' > d.txt
$T end >/dev/null
$T begin --label "rename and more" >/dev/null
mv a.txt b.txt; printf 'new line\n' >> b.txt
printf 'm2\n' > m.txt; printf 'n\n' > n.txt; rm d.txt
$T end >/dev/null
$T begin --label "rename c" >/dev/null
mv c.txt e.txt
$T end >/dev/null
$T begin --label "remove e" >/dev/null
rm e.txt
$T end >/dev/null
`)
	ctx := openUI(t, m)
	next := 5 // the turn the next restore makes
	// restoreWith restores the row of path in turn n with the button
	// button and returns its preview's text and the paths it changed.
	restoreWith := func(button string, n int, path string) (string, []string) {
		t.Helper()
		do(t, ctx, fmt.Sprintf("show %s in turn %d", path, n),
			click(fmt.Sprintf(`#timeline .row[data-turn="%d"]`, n)),
			chromedp.WaitVisible(chromedp.CSS(fmt.Sprintf(`#turn-head[data-turn="%d"]`, n))),
			click(fmt.Sprintf(`#files .file[data-path=%q]`, path)),
			chromedp.WaitVisible(chromedp.CSS(fmt.Sprintf(`#diff[data-path=%q]`, path))),
			click(button))
		if got := get(t, ctx, "the preview or an error", chromedp.Poll[string](`document.querySelector("#dialog").open ? "preview" :
			document.querySelector("#toast.error:not([hidden])")?.textContent ?? false`)); got != "preview" {
			t.Fatalf("restoring %s (%s) of turn %d: %s", path, button, n, got)
		}
		preview := get(t, ctx, "the preview", chromedp.Text(chromedp.CSS(`#dialog-title`))) + "\n" +
			get(t, ctx, "the preview", chromedp.Text(chromedp.CSS(`#dialog-body`)))
		before := snapshot(t, m.Dir, nil, nil)
		do(t, ctx, "confirm",
			click(`#dialog-confirm`),
			chromedp.WaitVisible(chromedp.CSS(fmt.Sprintf(`#timeline .row[data-turn="%d"].current`, next))))
		next++
		return preview, changedPaths(before, snapshot(t, m.Dir, nil, nil))
	}
	restore := func(n int, path string) (string, []string) { return restoreWith(`#act-restore`, n, path) }
	read := func(name string) string {
		t.Helper()
		b, err := os.ReadFile(filepath.Join(m.Dir, name))
		if os.IsNotExist(err) {
			return "(absent)"
		} else if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}

	preview, changed := restore(2, "b.txt")
	for _, want := range []string{"a.txt → b.txt", "before turn 2", "renamed b.txt -> a.txt"} {
		if !strings.Contains(preview, want) {
			t.Errorf("the rename's preview does not name %q:\n%s", want, preview)
		}
	}
	if got := strings.Join(changed, " "); got != "a.txt b.txt" {
		t.Errorf("restoring the rename changed %q, want a.txt b.txt", got)
	}
	if a, b := read("a.txt"), read("b.txt"); a != "old a\n" || b != "(absent)" {
		t.Errorf("after restoring the rename: a.txt %q, b.txt %q; want a.txt as before turn 2 and no b.txt", a, b)
	}

	// As after the turn, the rename is done again: b.txt with its bytes
	// then, a.txt as it was then (absent).
	preview, changed = restoreWith(`#act-restore-after`, 2, "b.txt")
	if !strings.Contains(preview, "Redo the rename a.txt → b.txt") || !strings.Contains(preview, "deleted a.txt") || !strings.Contains(preview, "added b.txt") {
		t.Errorf("the preview of redoing the rename:\n%s", preview)
	}
	if a, b := read("a.txt"), read("b.txt"); strings.Join(changed, " ") != "a.txt b.txt" || a != "(absent)" || b != "old a\nnew line\n" {
		t.Errorf("after restoring the rename as after turn 2: changed %q, a.txt %q, b.txt %q; want no a.txt and b.txt as after turn 2", changed, a, b)
	}

	// A rename whose new name a later turn removed: the old name back.
	preview, changed = restore(3, "e.txt")
	if !strings.Contains(preview, "c.txt") {
		t.Errorf("the rename's preview does not name c.txt:\n%s", preview)
	}
	if got := strings.Join(changed, " "); got != "c.txt" || read("c.txt") != "c\n" {
		t.Errorf("restoring the rename c.txt → e.txt, e.txt since removed, changed %q; c.txt %q", got, read("c.txt"))
	}

	// The other rows, one path each.
	for _, c := range []struct{ path, bytes string }{{"m.txt", "m\n"}, {"n.txt", "(absent)"}, {"d.txt", "d\n"}} {
		preview, changed := restore(2, c.path)
		if !strings.Contains(preview, c.path) {
			t.Errorf("the preview of restoring %s does not name it:\n%s", c.path, preview)
		}
		if got := strings.Join(changed, " "); got != c.path || read(c.path) != c.bytes {
			t.Errorf("restoring %s changed %q; it is %q, want %q", c.path, got, read(c.path), c.bytes)
		}
	}
}

// TestUIKeyboard: a turn, a step and a file are opened with the keyboard
// alone: Tab reaches the timeline, the arrow keys move in it, Enter
// opens the turn focused; Tab reaches its steps (buttons) and its files
// (a listbox), Enter and Space open them, the focus stays where it was
// when the pane is drawn again, and it is seen. Before, the rows could
// not have the focus: a turn could not be opened without a mouse.
func TestUIKeyboard(t *testing.T) {
	m := mountProject(t, t.TempDir())
	runIn(t, m.Dir, `
T=`+turnctlBin+`
$T begin --label first >/dev/null; echo x > x.txt; $T end >/dev/null
`+threeStepsTurn+`$T begin --label last >/dev/null; echo c > c.txt; $T end >/dev/null
`)
	ctx := openUI(t, m)
	active := func() string {
		t.Helper()
		return get(t, ctx, "the focus", chromedp.Evaluate[string](`(() => {
			const a = document.activeElement;
			if (!a || a === document.body) return "body";
			const o = a.closest("[data-turn], [data-step], [data-path]");
			return a.tagName.toLowerCase() + (a.id ? "#" + a.id : "") + (o ? " " + [...o.attributes].filter(x => x.name.startsWith("data-")).map(x => x.name + "=" + x.value).join(" ") : "");
		})()`))
	}
	tabTo := func(sel string) {
		t.Helper()
		for range 40 {
			if get(t, ctx, "the focus", chromedp.Evaluate[bool](fmt.Sprintf(`!!document.activeElement?.matches(%q)`, sel))) {
				return
			}
			do(t, ctx, "press Tab", chromedp.KeyEvent(kb.Tab))
		}
		t.Fatalf("40 Tabs did not reach %s; the focus is on %s", sel, active())
	}
	key := func(what, k string, want string) {
		t.Helper()
		do(t, ctx, what, chromedp.KeyEvent(k))
		if got := active(); got != want {
			t.Fatalf("%s: the focus is on %q, want %q", what, got, want)
		}
	}

	roles := get(t, ctx, "the roles", chromedp.Evaluate[string](`[document.querySelector("#timeline").getAttribute("role"), document.querySelector("#timeline .row").getAttribute("role")].join(" ")`))
	if roles != "listbox option" {
		t.Errorf("the timeline and its rows have the roles %q, want listbox option", roles)
	}
	tabTo(`#timeline .row`)
	if got := active(); got != "div data-turn=3" {
		t.Errorf("Tab reached %q in the timeline, want its first row (turn 3)", got)
	}
	if o := get(t, ctx, "the focus's outline", chromedp.Evaluate[string](`getComputedStyle(document.activeElement).outlineStyle`)); o == "none" {
		t.Errorf("the row focused has no outline: the focus is not seen")
	}
	key("ArrowDown", kb.ArrowDown, "div data-turn=2")
	key("ArrowDown", kb.ArrowDown, "div data-turn=1")
	key("ArrowUp", kb.ArrowUp, "div data-turn=2")
	key("Enter", kb.Enter, "div data-turn=2")
	do(t, ctx, "see turn 2",
		chromedp.WaitVisible(chromedp.CSS(`#turn-head[data-turn="2"]`)),
		chromedp.WaitVisible(chromedp.CSS(`#diff[data-path="a.txt"] pre`)))
	if sel := get(t, ctx, "the selected row", chromedp.AttributeValue(chromedp.CSS(`#timeline .row[data-turn="2"]`), "aria-selected")).Value; sel != "true" {
		t.Errorf("turn 2's row opened is aria-selected=%q", sel)
	}

	// The steps: buttons, the arrow keys between them.
	tabTo(`#steps .step-open`)
	if got := active(); got != "button data-step=2.1" {
		t.Errorf("Tab reached %q in the steps, want step 2.1", got)
	}
	key("ArrowDown", kb.ArrowDown, "button data-step=2.2")
	key("Enter", kb.Enter, "button data-step=2.2")
	do(t, ctx, "see step 2.2",
		chromedp.WaitVisible(chromedp.CSS(`#steps .step.selected[data-step="2.2"]`)),
		chromedp.WaitVisible(chromedp.CSS(`#diff[data-path="a.txt"] pre`)))
	if got := active(); got != "button data-step=2.2" {
		t.Errorf("after step 2.2 is shown, the focus is on %q, want still on its button", got)
	}
	key("Space", " ", "button data-step=2.2")
	do(t, ctx, "see the whole turn again",
		chromedp.WaitNotPresent(chromedp.CSS(`#steps .step.selected`)),
		chromedp.WaitVisible(chromedp.CSS(`#files .file[data-path="b.txt"]`)))
	if got := active(); got != "button data-step=2.2" {
		t.Errorf("after the whole turn is shown again, the focus is on %q, want still on step 2.2's button", got)
	}

	// The files: a listbox, Tab to the one shown.
	tabTo(`#files .file`)
	if got := active(); got != "div data-path=a.txt" {
		t.Errorf("Tab reached %q in the files, want a.txt", got)
	}
	key("ArrowDown", kb.ArrowDown, "div data-path=b.txt")
	key("Space", " ", "div data-path=b.txt")
	do(t, ctx, "see b.txt's diff", chromedp.WaitVisible(chromedp.CSS(`#diff[data-path="b.txt"] pre`)))
	if sel := get(t, ctx, "the file shown", chromedp.Evaluate[string](`[...document.querySelectorAll('#files [aria-selected="true"]')].map(e => e.dataset.path).join(" ")`)); sel != "b.txt" {
		t.Errorf("the files aria-selected: %q, want b.txt", sel)
	}
	// Shift+Tab back to the timeline: to the row of the turn shown.
	for range 40 {
		if get(t, ctx, "the focus", chromedp.Evaluate[bool](`!!document.activeElement?.matches("#timeline .row")`)) {
			break
		}
		do(t, ctx, "press Shift+Tab", chromedp.KeyEvent(kb.Tab, chromedp.KeyModifiers(chromedp.ModifierShift)))
	}
	if got := active(); got != "div data-turn=2" {
		t.Errorf("Shift+Tab back to the timeline reached %q, want turn 2's row", got)
	}
}

// TestUIRevertOffersConflictMarkers: a revert that later turns conflict
// with, in text, is not a dead end in the page (turnctl's refusal points
// at --conflicts=markers, which the page has no field for): the page
// previews it with conflict markers, and confirming writes them.
func TestUIRevertOffersConflictMarkers(t *testing.T) {
	m := mountProject(t, t.TempDir())
	runIn(t, m.Dir, `
T=`+turnctlBin+`
$T begin --label setup >/dev/null
printf 'a\nb\nc\n' > f.txt
$T end >/dev/null
$T begin --label two >/dev/null
printf 'a\nB2\nc\n' > f.txt
$T end >/dev/null
$T begin --label three >/dev/null
printf 'a\nB3\nc\n' > f.txt
$T end >/dev/null
`)
	ctx := openUI(t, m)
	do(t, ctx, "revert turn 2",
		click(`#timeline .row[data-turn="2"]`),
		chromedp.WaitVisible(chromedp.CSS(`#turn-head[data-turn="2"]`)),
		click(`#act-revert`))
	if got := get(t, ctx, "the preview or an error", chromedp.Poll[string](`document.querySelector("#dialog").open ? "preview" :
		document.querySelector("#toast.error:not([hidden])")?.textContent ?? false`)); got != "preview" {
		t.Fatalf("revert of a turn a later one conflicts with: %s", got)
	}
	title := get(t, ctx, "the title", chromedp.Text(chromedp.CSS(`#dialog-title`)))
	why := get(t, ctx, "the refusal", chromedp.Text(chromedp.CSS(`#markers-why`)))
	if !strings.Contains(title, "with conflict markers") || !strings.Contains(why, "f.txt") || strings.Contains(why, "--conflicts") {
		t.Errorf("the preview: %q / %q", title, why)
	}
	if b, _ := os.ReadFile(filepath.Join(m.Dir, "f.txt")); string(b) != "a\nB3\nc\n" {
		t.Fatalf("the preview changed f.txt: %q", b)
	}
	do(t, ctx, "confirm",
		click(`#dialog-confirm`),
		chromedp.WaitVisible(chromedp.CSS(`#timeline .row[data-turn="4"].current`)))
	b, err := os.ReadFile(filepath.Join(m.Dir, "f.txt"))
	if err != nil || !strings.Contains(string(b), "<<<<<<<") || !strings.Contains(string(b), "B3") || !strings.Contains(string(b), ">>>>>>>") {
		t.Errorf("after the revert with markers, f.txt: %q %v", b, err)
	}
}

// TestUIHistoryStartAndText: the turn where history starts (its older
// turns forgotten) offers no revert and no patch, which the server can
// only refuse, and says why; a label's and a prompt's escape sequences
// and bidirectional controls are written out, as turnctl prints them; a
// binary file's change shows its sizes, not a GIT binary patch.
func TestUIHistoryStartAndText(t *testing.T) {
	m := mountProject(t, t.TempDir())
	turnctlOK(t, m.Dir, "begin", "--label", "one \x1b[31mred\u202etxt.exe\n\nthe \x1b[2J prompt")
	os.WriteFile(filepath.Join(m.Dir, "a.txt"), []byte("a\n"), 0o644)
	turnctlOK(t, m.Dir, "end")
	turnctlOK(t, m.Dir, "begin", "--label", "two")
	os.WriteFile(filepath.Join(m.Dir, "data.bin"), []byte("\x00\x01\x02binary\x00"), 0o644)
	turnctlOK(t, m.Dir, "end")
	turnctlOK(t, m.Dir, "begin", "--label", "three")
	os.WriteFile(filepath.Join(m.Dir, "data.bin"), []byte("\x00\x03\x04binary, changed\x00"), 0o644)
	turnctlOK(t, m.Dir, "end")
	ctx := openUI(t, m)
	do(t, ctx, "show turn 1",
		click(`#timeline .row[data-turn="1"]`),
		chromedp.WaitVisible(chromedp.CSS(`#turn-head[data-turn="1"]`)))
	label := get(t, ctx, "the label", chromedp.Text(chromedp.CSS(`#turn-head .label`)))
	prompt := get(t, ctx, "the prompt", chromedp.Evaluate[string](`document.querySelector("#prompt pre").textContent`))
	row := get(t, ctx, "the row's label", chromedp.Text(chromedp.CSS(`#timeline .row[data-turn="1"] .label`)))
	for _, s := range []string{label, prompt, row} {
		if strings.ContainsAny(s, "\x1b\u202e") || !strings.Contains(s, `\x1b[31mred\u202etxt.exe`) {
			t.Errorf("a label or prompt reads %q", s)
		}
	}
	if !strings.Contains(prompt, "\nthe \\x1b[2J prompt") {
		t.Errorf("the prompt reads %q", prompt)
	}
	do(t, ctx, "show turn 3's binary file",
		click(`#timeline .row[data-turn="3"]`),
		chromedp.WaitVisible(chromedp.CSS(`#turn-head[data-turn="3"]`)),
		click(`#files .file[data-path="data.bin"]`),
		chromedp.WaitVisible(chromedp.CSS(`#diff[data-path="data.bin"]`)))
	diff := get(t, ctx, "the binary diff", chromedp.Text(chromedp.CSS(`#diff`)))
	if !strings.Contains(diff, "binary file") || !strings.Contains(diff, "19 bytes") || strings.Contains(diff, "GIT binary patch") {
		t.Errorf("the binary file's change reads:\n%s", diff)
	}

	turnctlOK(t, m.Dir, "forget", "0")
	ctx = openUI(t, m)
	do(t, ctx, "show turn 1, where history starts",
		click(`#timeline .row[data-turn="1"]`),
		chromedp.WaitVisible(chromedp.CSS(`#turn-head[data-turn="1"]`)),
		chromedp.WaitVisible(chromedp.CSS(`#at-start`)))
	if n := get(t, ctx, "the start turn's dead controls", chromedp.Evaluate[int](`document.querySelectorAll("#act-revert, #dl-patch").length`)); n != 0 {
		t.Errorf("the turn where history starts offers %d of revert and patch", n)
	}
	do(t, ctx, "show turn 2",
		click(`#timeline .row[data-turn="2"]`),
		chromedp.WaitVisible(chromedp.CSS(`#turn-head[data-turn="2"]`)),
		chromedp.WaitVisible(chromedp.CSS(`#act-revert`)),
		chromedp.WaitVisible(chromedp.CSS(`#dl-patch`)))
}
