package main

// The web page of turnctl ui, measured in headless chromium (C only):
// time to first paint and to an interactive timeline of the history
// logShow made (1000+ turns), and to show the first page of a 20k-file
// turn's changes with its first file's diff. Each repetition starts a new
// `turnctl ui` (nothing cached) and a new tab.

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"time"

	"github.com/chromedp/chromedp"
)

// uiFiles is how many files the big turn the page shows changes.
func (h *history) uiFiles() int {
	if h.b.o.quick {
		return 2000
	}
	return 20000
}

func (h *history) ui(ctx context.Context) error {
	exe, err := exec.LookPath("chromium")
	if err != nil {
		h.b.note("ui figures skipped: no chromium (apt-get install chromium)")
		return nil
	}
	// The big turn: uiFiles new files, the newest turn, so the first row.
	n := h.uiFiles()
	turn, err := h.beginTurn(ctx)
	if err != nil {
		return err
	}
	if err := genFiles(ctx, h.p("ui"), 0, n); err != nil {
		return err
	}
	if err := h.c.End(ctx); err != nil {
		return err
	}
	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(exe),
		chromedp.NoSandbox, chromedp.Headless, chromedp.DisableGPU,
		chromedp.UserDataDir(h.p("..", "chromium")), chromedp.WindowSize(1400, 900))
	actx, cancelAlloc := chromedp.NewExecAllocator(ctx, opts...)
	defer cancelAlloc()
	bctx, cancelBrowser := chromedp.NewContext(actx)
	defer cancelBrowser()
	if err := chromedp.Do(bctx); err != nil {
		return fmt.Errorf("starting chromium: %w", err)
	}
	defer os.RemoveAll(h.p("..", "chromium"))
	turns := h.b.sz.logTurns
	names := []string{fmt.Sprintf("ui: first paint (%d+ turns)", turns), fmt.Sprintf("ui: interactive timeline (%d+ turns)", turns),
		fmt.Sprintf("ui: first page of a %d-file turn, with a diff", n)}
	for rep := 0; rep < h.reps; rep++ {
		ms, err := h.uiOnce(bctx, turn)
		if err != nil {
			return err
		}
		for i, name := range names {
			h.record(name, "C", sample{Wall: ms[i] / 1000})
		}
	}
	return nil
}

// uiOnce starts turnctl ui, loads the page in a new tab and clicks the big
// turn; it returns the milliseconds to first contentful paint and to the
// timeline drawn (from the start of the navigation), and from the click to
// the turn's first page of files and first diff shown.
func (h *history) uiOnce(bctx context.Context, turn int) ([3]float64, error) {
	var ms [3]float64
	ctx, cancel := context.WithTimeout(bctx, 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, h.b.o.turnctl, "-C", h.c.Dir(), "ui", "--no-open")
	out, err := cmd.StdoutPipe()
	if err != nil {
		return ms, err
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		return ms, err
	}
	defer func() {
		cmd.Process.Kill()
		cmd.Wait()
	}()
	url := ""
	sc := bufio.NewScanner(out)
	for url == "" && sc.Scan() {
		if l := strings.TrimSpace(sc.Text()); strings.HasPrefix(l, "http://") {
			url = l
		}
	}
	if url == "" {
		return ms, fmt.Errorf("turnctl ui printed no URL: %s", strings.TrimSpace(stderr.String()))
	}
	tab, closeTab := chromedp.NewContext(bctx)
	defer closeTab()
	tab, cancelTab := context.WithTimeout(tab, 5*time.Minute)
	defer cancelTab()
	if err := chromedp.Do(tab, chromedp.Navigate(url)); err != nil {
		return ms, fmt.Errorf("loading the page: %w", err)
	}
	load, err := chromedp.Run(tab, chromedp.Evaluate[[]float64](`new Promise(resolve => {
		const f = () => {
			const fcp = performance.getEntriesByName("first-contentful-paint")[0];
			if (window.ckptfsReadyAt && fcp) resolve([fcp.startTime, window.ckptfsReadyAt]);
			else setTimeout(f, 5);
		};
		f();
	})`, chromedp.EvalAwaitPromise))
	if err != nil || len(load) != 2 {
		return ms, fmt.Errorf("timing the page: %v", err)
	}
	big, err := chromedp.Run(tab, chromedp.Evaluate[float64](fmt.Sprintf(`new Promise((resolve, reject) => {
		const row = document.querySelector('#timeline .row[data-turn="%d"]');
		if (!row) { reject(new Error("no row for turn %d")); return; }
		const t0 = performance.now();
		row.click();
		const f = () => {
			if (document.querySelector('#turn-head[data-turn="%d"]') && document.querySelector("#files .file") &&
				document.querySelector("#diff[data-path] pre, #diff[data-path] table")) resolve(performance.now() - t0);
			else setTimeout(f, 5);
		};
		f();
	})`, turn, turn, turn), chromedp.EvalAwaitPromise))
	if err != nil {
		return ms, fmt.Errorf("timing the big turn: %w", err)
	}
	ms[0], ms[1], ms[2] = load[0], load[1], big
	return ms, nil
}
