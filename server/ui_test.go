package server

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"image/color"
	"image/png"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// statsIDs are elements the status page fills from /v1/stats.
var statsIDs = []string{"status", "running", "waiting", "finished", "hit-all", "hit-all-total", "hit-device",
	"hit-host", "blocks-free", "blocks-cached-idle", "blocks-in-use", "blocks-total", "prefill-rate", "gen-rate",
	"ttft-p50", "ttft-p90", "ttft-p99", "itl-p50", "itl-p90", "itl-p99", "evictions", "hit-age"}

func TestUIIndex(t *testing.T) {
	h := newHarness(t)
	code, body, hdr := h.do("GET", "/", "")
	if code != 200 {
		t.Fatalf("GET /: %d %s", code, body)
	}
	if ct := hdr.Get("Content-Type"); !strings.HasPrefix(ct, "text/html") {
		t.Errorf("GET / Content-Type %q", ct)
	}
	if csp := hdr.Get("Content-Security-Policy"); !strings.Contains(csp, "default-src 'none'") {
		t.Errorf("GET / Content-Security-Policy %q", csp)
	}
	for _, id := range statsIDs {
		if !bytes.Contains(body, []byte(`id="`+id+`"`)) {
			t.Errorf("GET / has no element id=%q", id)
		}
	}
	if !bytes.Contains(body, []byte(`"/v1/stats"`)) {
		t.Error("GET / does not poll /v1/stats")
	}
	// Self-contained: nothing loaded from elsewhere.
	if m := regexp.MustCompile(`(?i)(src|href)\s*=|@import|url\(|//[a-z0-9.-]+\.[a-z]{2,}/`).Find(body); m != nil {
		t.Errorf("GET / references an external resource: %q", m)
	}
	if code, _, hdr := h.do("POST", "/", "{}"); code != 405 || hdr.Get("Allow") != "GET" {
		t.Errorf("POST /: %d, Allow %q", code, hdr.Get("Allow"))
	}
}

func (h *harness) stats() statsJSON {
	h.t.Helper()
	code, b, hdr := h.do("GET", "/v1/stats", "")
	if code != 200 {
		h.t.Fatalf("GET /v1/stats: %d %s", code, b)
	}
	if ct := hdr.Get("Content-Type"); ct != "application/json" {
		h.t.Fatalf("GET /v1/stats Content-Type %q", ct)
	}
	var s statsJSON
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&s); err != nil {
		h.t.Fatalf("decoding /v1/stats %s: %v", b, err)
	}
	return s
}

func TestUIStats(t *testing.T) {
	h := newHarness(t, withServer(func(c *Config) { c.APIKeys, c.PublicStats = map[string]string{"key-a": "tenant-a"}, true }))
	before := h.stats()
	if before.RequestsFinished != 0 || before.Tokens.Generated != 0 || before.HitRate.All != nil ||
		before.Latency["ttft"].Total.Count != 0 || before.Latency["ttft"].Total.P50 != nil {
		t.Fatalf("a fresh server's stats are not empty: %+v", before)
	}
	if before.Blocks.Total != 192 || before.Blocks.Free != 192 {
		t.Fatalf("blocks %+v, want 192 free", before.Blocks)
	}
	for _, k := range []string{"ttft", "itl", "e2e", "queue"} {
		if _, ok := before.Latency[k]; !ok {
			t.Errorf("latency_seconds has no %q", k)
		}
	}
	for _, k := range []string{"ttl", "lru", "priority", "flush", "pressure"} {
		if _, ok := before.Evicted[k]; !ok {
			t.Errorf("evicted_blocks has no %q", k)
		}
	}

	// Stats need no API key even when generation does, and say nothing
	// about prompts.
	const prompt = "a secret prompt that the stats page must never show"
	body := `{"prompt": "` + prompt + `", "max_tokens": 5}`
	h.generate(body, "Authorization", "Bearer key-a")
	h.generate(body, "Authorization", "Bearer key-a")
	var after statsJSON
	waitFor(t, "stats to count both requests", func() bool {
		after = h.stats()
		return after.RequestsFinished == 2
	})
	_, raw, _ := h.do("GET", "/v1/stats", "")
	if bytes.Contains(raw, []byte("secret")) || bytes.Contains(raw, []byte("tenant-a")) {
		t.Fatalf("/v1/stats leaks a prompt or tenant: %s", raw)
	}

	if after.Tokens.Generated != 10 || after.Tokens.Prompt == 0 || after.Tokens.CacheQuery == 0 {
		t.Errorf("tokens %+v, want 10 generated and the prompts looked up", after.Tokens)
	}
	if r := after.HitRate.All; r == nil || *r <= 0 || *r >= 1 {
		t.Errorf("hit rate %v, want the second prompt's cached share", r)
	}
	if r := after.RecentHitRate.Device; r == nil || *r != *after.HitRate.Device {
		t.Errorf("recent device hit rate %v, want the since-start %v: the window covers the server's life", r, after.HitRate.Device)
	}
	if after.WindowSeconds <= 0 || after.RecentRates.GeneratedTokens <= 0 || after.RecentRates.Requests <= 0 {
		t.Errorf("window %v s, rates %+v", after.WindowSeconds, after.RecentRates)
	}
	for k, want := range map[string]uint64{"ttft": 2, "itl": 8, "e2e": 2, "queue": 2} {
		q := after.Latency[k]
		if q.Total.Count != want || q.Recent.Count != want {
			t.Errorf("%s: %d observations (recent %d), want %d", k, q.Total.Count, q.Recent.Count, want)
		}
		if q.Recent.P50 == nil || q.Recent.P99 == nil || *q.Recent.P50 <= 0 || *q.Recent.P50 > *q.Recent.P99 {
			t.Errorf("%s quantiles %+v", k, q.Recent)
		}
	}
	if age := after.CacheHitAge["device"]; age.Total.Count == 0 || age.Total.P50 == nil {
		t.Errorf("device hit age %+v, want the second request's hits", age)
	}
	if b := after.Blocks; b.InUse != 0 || b.CachedIdle == 0 || b.Free+b.CachedIdle != b.Total {
		t.Errorf("blocks %+v, want the cached prompt idle and the rest free", b)
	}
}

func TestUIStatsWindow(t *testing.T) {
	h := newHarness(t)
	w := &statsWindowed{s: h.srv}
	t0 := time.Unix(1000, 0)
	w.snaps = []statsSnap{w.take(t0)}
	at := func(d time.Duration) time.Time { return t0.Add(d) }
	steps := []struct {
		now      time.Duration
		wantBase time.Duration
		wantKept int
	}{
		{10 * time.Second, 0, 2},
		{10*time.Second + statsSpacing/2, 0, 2}, // too close to the last: not kept
		{30 * time.Second, 0, 3},
		{statsWindow + 5*time.Second, 0, 4},                 // t0 is the newest snapshot at least a window old
		{statsWindow + 20*time.Second, 10 * time.Second, 4}, // 10 s is now the newest that old
		{3 * statsWindow, statsWindow + 20*time.Second, 2},  // after a pause, the last poll is the base
		{3*statsWindow + time.Second, statsWindow + 20*time.Second, 3},
	}
	for _, st := range steps {
		_, base := w.observe(at(st.now))
		if got := base.at.Sub(t0); got != st.wantBase || len(w.snaps) != st.wantKept {
			t.Fatalf("at %v: base %v, %d snapshots kept; want %v, %d", st.now, got, len(w.snaps), st.wantBase, st.wantKept)
		}
	}
}

func TestUIStatsQuantile(t *testing.T) {
	h := histSnap{bounds: []float64{1, 2, 4}, cum: []uint64{10, 30, 40}, count: 50}
	for _, tc := range []struct{ q, want float64 }{
		{0.1, 0.5}, // rank 5 in [0,1]: halfway
		{0.2, 1},   // rank 10: the first bucket's top
		{0.4, 1.5}, // rank 20 in [1,2]: halfway
		{0.7, 3},   // rank 35 in [2,4]: halfway
		{0.9, 4},   // rank 45 in +Inf: the highest finite bound
		{0.99, 4},
	} {
		got := h.quantile(tc.q)
		if got == nil || *got != tc.want {
			t.Errorf("quantile(%v) = %v, want %v", tc.q, got, tc.want)
		}
	}
	if q := (histSnap{bounds: []float64{1}, cum: []uint64{0}}).quantile(0.5); q != nil {
		t.Errorf("quantile of no observations = %v, want nil", *q)
	}
	base := histSnap{bounds: h.bounds, cum: []uint64{10, 10, 10}, count: 10}
	if d := h.since(base); d.count != 40 || d.cum[0] != 0 || d.cum[2] != 30 {
		t.Errorf("since: %+v", d)
	}
}

// chromium finds the browser for TestUIChromium. It skips the test if
// there is none, unless PREFIXD_REQUIRE_CHROMIUM is set (as CI sets it
// after scripts/install-chromium.sh), when it fails.
func chromium(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if os.Getenv("PREFIXD_REQUIRE_CHROMIUM") != "" {
		t.Fatal("PREFIXD_REQUIRE_CHROMIUM is set but chromium is not on PATH: run scripts/install-chromium.sh")
	}
	t.Skip("chromium not installed (scripts/install-chromium.sh installs it)")
	return ""
}

// runChromium runs headless Chromium on url with extra flags, bounded by a
// deadline that only guards against a hang, and returns its stdout.
func runChromium(t *testing.T, bin, profile, url string, flags ...string) []byte {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	args := append([]string{"--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
		"--no-first-run", "--no-default-browser-check", "--disable-extensions", "--mute-audio",
		"--user-data-dir=" + profile, "--window-size=1200,900", "--virtual-time-budget=5000"}, flags...)
	cmd := exec.CommandContext(ctx, bin, append(args, url)...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	cmd.Env = append(os.Environ(), "HOME="+profile)
	if err := cmd.Run(); err != nil {
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			t.Fatalf("chromium %v: still running after the deadline\n%s", flags, stderr.Bytes())
		}
		t.Fatalf("chromium %v: %v\n%s", flags, err, stderr.Bytes())
	}
	return stdout.Bytes()
}

// elementText returns the text of the element with the given id in an
// HTML dump, tags stripped.
func elementText(dom, id string) (string, bool) {
	m := regexp.MustCompile(`<(\w+)[^>]*\bid="` + regexp.QuoteMeta(id) + `"[^>]*>`).FindStringSubmatchIndex(dom)
	if m == nil {
		return "", false
	}
	tag := dom[m[2]:m[3]]
	rest := dom[m[1]:]
	end := strings.Index(rest, "</"+tag+">")
	if end < 0 {
		return "", false
	}
	text := regexp.MustCompile(`<[^>]*>`).ReplaceAllString(rest[:end], "")
	return strings.TrimSpace(text), true
}

// TestUIChromium renders the status page in headless Chromium against a
// live server and checks the page shows figures, not placeholders or
// errors, and draws something.
func TestUIChromium(t *testing.T) {
	bin := chromium(t)
	h := newHarness(t)
	body := `{"prompt": "The status page shows what the cache is doing right now.", "max_tokens": 6}`
	h.generate(body)
	h.generate(body)
	waitFor(t, "stats to count both requests", func() bool { return h.stats().RequestsFinished == 2 })

	dir := t.TempDir()
	dom := string(runChromium(t, bin, filepath.Join(dir, "profile-dom"), h.url+"/", "--dump-dom"))
	wantText := map[string]*regexp.Regexp{
		"status":        regexp.MustCompile(`^live, updated `),
		"running":       regexp.MustCompile(`^0$`),
		"waiting":       regexp.MustCompile(`^0$`),
		"finished":      regexp.MustCompile(`^2$`),
		"hit-all-total": regexp.MustCompile(`^\d+\.\d%$`),
		"hit-device":    regexp.MustCompile(`^\d+\.\d%$`),
		"blocks-total":  regexp.MustCompile(`^192$`),
		"blocks-free":   regexp.MustCompile(`^\d+$`),
		"gen-rate":      regexp.MustCompile(`^\d+(\.\d+)?$`),
		"ttft-p50":      regexp.MustCompile(`^\d+(\.\d+)? (µs|ms|s)$`),
		"itl-p99":       regexp.MustCompile(`^\d+(\.\d+)? (µs|ms|s)$`),
		"ttft-n":        regexp.MustCompile(`^2$`),
		"evictions":     regexp.MustCompile(`^ttl\s*0\s*0`), // rows sorted by reason: flush, lru, ..., ttl
		"hit-age":       regexp.MustCompile(`device.*\d`),
	}
	for id, re := range wantText {
		text, ok := elementText(dom, id)
		if !ok {
			t.Errorf("rendered page has no element %q", id)
			continue
		}
		if id == "evictions" {
			text = text[strings.LastIndex(text, "ttl"):]
		}
		if !re.MatchString(text) {
			t.Errorf("element %q shows %q, want %v", id, text, re)
		}
	}
	visible := regexp.MustCompile(`(?s)<script.*?</script>`).ReplaceAllString(dom, "")
	for _, bad := range []string{"NaN", "undefined", "error:", "Infinity"} {
		if strings.Contains(visible, bad) {
			t.Errorf("rendered page contains %q", bad)
		}
	}

	shot := filepath.Join(dir, "page.png")
	runChromium(t, bin, filepath.Join(dir, "profile-shot"), h.url+"/", "--screenshot="+shot, "--hide-scrollbars")
	checkScreenshot(t, shot, 1200, 900)
	if out := os.Getenv("PREFIXD_UI_SCREENSHOT"); out != "" {
		b, err := os.ReadFile(shot)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(out, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// checkScreenshot checks that file is a width x height PNG with more than
// a blank page in it.
func checkScreenshot(t *testing.T, file string, width, height int) {
	t.Helper()
	f, err := os.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	img, err := png.Decode(f)
	if err != nil {
		t.Fatalf("screenshot: %v", err)
	}
	if b := img.Bounds(); b.Dx() != width || b.Dy() != height {
		t.Fatalf("screenshot is %dx%d, want %dx%d", b.Dx(), b.Dy(), width, height)
	}
	bg := img.At(0, 0)
	colours := map[color.RGBA]bool{}
	var ink int
	b := img.Bounds()
	for y := b.Min.Y; y < b.Max.Y; y++ {
		for x := b.Min.X; x < b.Max.X; x++ {
			c := img.At(x, y)
			colours[color.RGBAModel.Convert(c).(color.RGBA)] = true
			if !sameColour(c, bg) {
				ink++
			}
		}
	}
	// Text, cards and the block bar: anti-aliased text alone gives
	// hundreds of colours; a blank or error-only page has a handful.
	if len(colours) < 50 || ink < width*height/50 {
		t.Fatalf("screenshot looks blank: %d colours, %d of %d pixels differ from the background", len(colours), ink, width*height)
	}
	t.Logf("screenshot: %d colours, %.1f%% of pixels off the background", len(colours), 100*float64(ink)/float64(width*height))
}

func sameColour(a, b color.Color) bool {
	r1, g1, b1, a1 := a.RGBA()
	r2, g2, b2, a2 := b.RGBA()
	return r1 == r2 && g1 == g2 && b1 == b2 && a1 == a2
}
