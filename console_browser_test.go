package eddy_test

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/eddy-streams/eddy"
	"github.com/eddy-streams/eddy/kafkatest"
	"github.com/eddy-streams/eddy/processor"
	"github.com/eddy-streams/eddy/topology"
)

// startConsole starts an instance serving HandlerWith(opts) with the console on its
// AdvertisedAddr.
func startConsole(t *testing.T, e *wcEnv, opts eddy.HandlerOptions, adjust ...func(*eddy.App)) *served {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	cfg := e.config(t)
	cfg.AdvertisedAddr = ln.Addr().String()
	in := startWith(t, e.topo, cfg, adjust...)
	opts.Console = true
	srv := &http.Server{Handler: in.app.HandlerWith(opts), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	return &served{instance: in, base: "http://" + ln.Addr().String()}
}

// chromium finds Debian's headless-capable Chromium. CI installs it (.ci/run); a test
// run elsewhere without it skips the browser tests, except under CI=true, where a
// missing browser is a broken CI machine and fails.
func chromium(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if os.Getenv("CI") != "" {
		t.Fatal("no chromium on PATH; .ci/run installs Debian's chromium package")
	}
	t.Skip("no chromium on PATH (apt-get install chromium)")
	return ""
}

// browser is a headless Chromium window of a size; it keeps what the pages log as
// errors: uncaught exceptions, console.error, and the browser's own error entries (a
// resource that failed to load, a Content-Security-Policy violation).
type browser struct {
	ctx    context.Context
	mu     sync.Mutex
	errors []string
}

func newBrowser(t *testing.T, width, height int) *browser {
	t.Helper()
	opts := append(slices.Clone(chromedp.DefaultExecAllocatorOptions[:]),
		chromedp.ExecPath(chromium(t)),
		chromedp.NoSandbox, // CI runs as root, where Chromium's sandbox does not start
		chromedp.DisableGPU,
		chromedp.WindowSize(width, height),
		chromedp.Flag("disable-dev-shm-usage", true),
	)
	actx, cancelA := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancelC := chromedp.NewContext(actx)
	b := &browser{ctx: ctx}
	if err := chromedp.Do(ctx); err != nil { // starts the browser and its tab
		cancelC()
		cancelA()
		t.Fatalf("starting chromium: %v", err)
	}
	messages := chromedp.Console(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for m, err := range messages {
			if err != nil {
				return
			}
			if m.Type == chromedp.ConsoleError || m.IsException() {
				b.mu.Lock()
				b.errors = append(b.errors, fmt.Sprintf("%s (%s)", m, m.URL))
				b.mu.Unlock()
			}
		}
	}()
	t.Cleanup(func() { cancelC(); cancelA(); <-done })
	return b
}

func (b *browser) do(t *testing.T, what string, steps ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 30*time.Second)
	defer cancel()
	if err := chromedp.Do(ctx, steps...); err != nil {
		t.Fatalf("browser: %s: %v", what, err)
	}
}

// eval evaluates a JavaScript expression in the page into out.
func eval[T any](t *testing.T, b *browser, expr string) T {
	t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 30*time.Second)
	defer cancel()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[T](expr))
	if err != nil {
		t.Fatalf("browser: evaluating %s: %v", expr, err)
	}
	return v
}

func (b *browser) noErrors(t *testing.T) {
	t.Helper()
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, e := range b.errors {
		t.Errorf("the page logged an error: %s", e)
	}
}

// screenshot saves the page as dir/name.png when EDDY_CONSOLE_SCREENSHOTS names a
// directory (docs/operations.md's pictures come from here).
func (b *browser) screenshot(t *testing.T, name string, full bool) {
	t.Helper()
	dir := os.Getenv("EDDY_CONSOLE_SCREENSHOTS")
	if dir == "" {
		return
	}
	ctx, cancel := context.WithTimeout(b.ctx, 30*time.Second)
	defer cancel()
	shot := chromedp.CaptureScreenshot() // what the window shows
	if full {
		shot = chromedp.FullScreenshot(100)
	}
	png, err := chromedp.Run(ctx, shot)
	if err != nil {
		t.Fatalf("screenshot %s: %v", name, err)
	}
	if err := os.WriteFile(filepath.Join(dir, name+".png"), png, 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestConsoleInBrowser opens the console of one of two word-count instances on the
// embedded broker in headless Chromium, as an operator would: the overview loads and
// lists the tasks of both instances with no error logged, a task's input lag changes
// on the page while input flows (the page polls; it is never reloaded), the topology
// graph has a node for every source, processor, sink, store and topic, and a key
// lookup in the store browser for a key the other instance holds shows its value and
// who answered.
func TestConsoleInBrowser(t *testing.T) {
	chromium(t)
	c := kafkatest.Embedded(t)
	e := newWordCount(t, c, 4)
	// Each commit waits 100 ms, so records pile up in front of the tasks while input
	// flows and their lag rises well above the few transaction markers a caught-up
	// partition of a transactional topic shows.
	var slowCommits atomic.Bool
	slow := func(app *eddy.App) {
		eddy.SetBeforeCommitHook(app, func(processor.TaskID) error {
			if slowCommits.Load() {
				time.Sleep(100 * time.Millisecond)
			}
			return nil
		})
	}
	a, b := startConsole(t, e, eddy.HandlerOptions{}, slow), startConsole(t, e, eddy.HandlerOptions{}, slow)
	waitFor(t, time.Minute, "both instances running with tasks of their own", func() (bool, error) {
		return a.app.State() == eddy.StateRunning && b.app.State() == eddy.StateRunning &&
			len(a.app.Tasks()) > 0 && len(b.app.Tasks()) > 0 && len(a.app.Tasks())+len(b.app.Tasks()) == 8, nil
	})
	e.produce(t, 50)
	e.waitCounts(t, time.Minute, "the first counts")

	br := newBrowser(t, 1280, 900)
	br.do(t, "open the overview", chromedp.Navigate(a.base+"/ui/"), chromedp.WaitVisible(chromedp.CSS("table.tasks")))
	taskRows := eval[[]string](t, br, `Array.from(document.querySelectorAll("table.tasks tr[data-task]")).map(r => r.dataset.task + "@" + r.cells[1].textContent)`)
	if len(taskRows) != 8 {
		t.Fatalf("the overview lists %d tasks, want the 8 of both instances: %v", len(taskRows), taskRows)
	}
	for _, s := range []*served{a, b} {
		addr := strings.TrimPrefix(s.base, "http://")
		if !slices.ContainsFunc(taskRows, func(r string) bool { return strings.HasSuffix(r, "@"+addr) }) {
			t.Errorf("the overview lists no task of instance %s: %v", addr, taskRows)
		}
	}

	// Input flows in the background; the page's live part must show some task's lag
	// above zero, then lower, without a reload.
	slowCommits.Store(true)
	produced := make(chan error, 1)
	go func() {
		var err error
		for i := 0; i < 4 && err == nil; i++ {
			err = e.produceErr(1000)
		}
		produced <- err
	}()
	seen := map[string][]int64{} // task/topic → the distinct lags seen, in order
	moved := ""
	deadline := time.Now().Add(40 * time.Second)
	for moved == "" && time.Now().Before(deadline) {
		lags := eval[[]struct {
			Task string `json:"task"`
			Lag  int64  `json:"lag"`
		}](t, br, `Array.from(document.querySelectorAll("span.lagp")).map(s => ({task: s.closest("tr").dataset.task + " " + s.dataset.topic, lag: Number(s.dataset.lag)}))`)
		for _, l := range lags {
			vs := seen[l.Task]
			if len(vs) == 0 || vs[len(vs)-1] != l.Lag {
				seen[l.Task] = append(vs, l.Lag)
			}
			if vs := seen[l.Task]; len(vs) >= 2 && slices.Max(vs) >= 20 && vs[len(vs)-1] < slices.Max(vs) {
				moved = l.Task
			}
		}
		time.Sleep(300 * time.Millisecond)
	}
	if moved == "" {
		t.Fatalf("no task's lag moved on the page within 40s while input flowed; lags seen: %v", seen)
	}
	t.Logf("task %s: lag on the page went %v", moved, seen[moved])
	slowCommits.Store(false)
	if err := <-produced; err != nil {
		t.Fatal(err)
	}
	br.screenshot(t, "console-overview", true)

	// The topology graph: every node the console's DOT names is drawn.
	br.do(t, "open the topology", chromedp.Navigate(a.base+"/ui/topology"), chromedp.WaitVisible(chromedp.CSS("#graph svg g.node")))
	titles := eval[[]string](t, br, `Array.from(document.querySelectorAll("#graph svg g.node > title")).map(t => t.textContent)`)
	want := eddy.ConsoleNodeIDs(a.app)
	for _, id := range want {
		if !slices.Contains(titles, id) {
			t.Errorf("the graph lacks node %q; it has %v", id, titles)
		}
	}
	if len(titles) != len(want) {
		t.Errorf("the graph has %d nodes, want %d: %v", len(titles), len(want), titles)
	}
	br.screenshot(t, "console-topology", true)

	// A key held by b, looked up on a's page through the form.
	e.waitCounts(t, time.Minute, "the counts of all input")
	q, err := eddy.Query[string, int64](a.app, "counts")
	if err != nil {
		t.Fatal(err)
	}
	word := ""
	for _, w := range sortedKeys(e.want) {
		if owner, local, err := q.Owner(w); err == nil && !local && owner == strings.TrimPrefix(b.base, "http://") {
			word = w
			break
		}
	}
	if word == "" {
		t.Fatal("no word is held by the second instance")
	}
	br.do(t, "look up a key",
		chromedp.Navigate(a.base+"/ui/stores"),
		chromedp.SetValue(chromedp.CSS(`select[name="store"]`), "counts"),
		chromedp.SetValue(chromedp.CSS(`select[name="op"]`), "get"),
		chromedp.SendKeys(chromedp.CSS(`input[name="key"]`), word),
		chromedp.Submit(chromedp.CSS(`input[name="key"]`)),
		chromedp.WaitVisible(chromedp.CSS("table.result")))
	readCells := `Array.from(document.querySelectorAll("table.result tbody tr:first-child td")).map(td => td.textContent.trim())`
	cells := eval[[]string](t, br, readCells)
	wantCells := []string{word, fmt.Sprint(e.want[word]), strings.TrimPrefix(b.base, "http://")}
	// The store is written just after its transaction commits, so the output can be
	// read a moment before the store has the last count: reload the answer a while.
	for retry := time.Now().Add(10 * time.Second); !slices.Equal(cells, wantCells) && time.Now().Before(retry); {
		time.Sleep(200 * time.Millisecond)
		br.do(t, "reload the lookup", chromedp.Reload(), chromedp.WaitVisible(chromedp.CSS("table.result")))
		cells = eval[[]string](t, br, readCells)
	}
	if !slices.Equal(cells, wantCells) {
		t.Errorf("looking up %q on the first instance's console shows %q, want %q (key, count, the instance that holds it)", word, cells, wantCells)
	}
	br.screenshot(t, "console-stores", true)

	// Phone width: the overview still renders its tables (as labelled blocks).
	phone := newBrowser(t, 390, 844)
	phone.do(t, "open the overview on a phone", chromedp.EmulateViewport(390, 844, chromedp.EmulateMobile, chromedp.EmulateScale(2)),
		chromedp.Navigate(b.base+"/ui/"), chromedp.WaitVisible(chromedp.CSS("table.tasks")))
	if eval[bool](t, phone, `document.documentElement.scrollWidth > window.innerWidth + 1`) {
		t.Errorf("the overview is wider than a 390 px phone screen")
	}
	phone.screenshot(t, "console-phone", false)
	br.noErrors(t)
	phone.noErrors(t)
}

// startWith is start with adjustments to the App before it runs (test seams).
func startWith(t *testing.T, topo *topology.Topology, cfg eddy.Config, adjust ...func(*eddy.App)) *instance {
	t.Helper()
	if cfg.Logger == nil {
		cfg.Logger = testLogger(t)
	}
	app, err := eddy.New(topo, cfg)
	if err != nil {
		t.Fatal(err)
	}
	for _, fn := range adjust {
		fn(app)
	}
	ctx, cancel := context.WithCancel(context.Background())
	in := &instance{app: app, cancel: cancel, done: make(chan error, 1)}
	go func() { in.done <- app.Run(ctx) }()
	t.Cleanup(func() { _ = in.stop() })
	return in
}
