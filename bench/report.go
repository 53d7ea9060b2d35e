package bench

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"runtime"
	"strings"
	"text/tabwriter"
	"time"
)

// Machine describes where a report was measured.
type Machine struct {
	CPU       string `json:"cpu"`
	NProc     int    `json:"nproc"`
	GOOS      string `json:"goos"`
	GOARCH    string `json:"goarch"`
	GoVersion string `json:"go_version"`
	// LoadAvg is /proc/loadavg's 1, 5 and 15 minute load when the run
	// started: on a shared machine, how much else was running.
	LoadAvg string `json:"loadavg,omitempty"`
}

// loadAvg returns the first three fields of /proc/loadavg, or "".
func loadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return ""
	}
	f := strings.Fields(string(b))
	return strings.Join(f[:min(3, len(f))], " ")
}

// ThisMachine describes the running machine; the CPU model comes from
// /proc/cpuinfo where there is one.
func ThisMachine() Machine {
	m := Machine{NProc: runtime.NumCPU(), GOOS: runtime.GOOS, GOARCH: runtime.GOARCH, GoVersion: runtime.Version(), CPU: "unknown", LoadAvg: loadAvg()}
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for line := range strings.Lines(string(b)) {
			if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
				m.CPU = strings.TrimSpace(v)
				break
			}
		}
	}
	return m
}

// WorkloadInfo names a workload and its generator's parameters.
type WorkloadInfo struct {
	Name   string `json:"name"`
	Params string `json:"params"`
}

// Report is a whole benchmark run.
type Report struct {
	Command   string         `json:"command"`
	Model     string         `json:"model"`
	Seed      uint64         `json:"seed"`
	Machine   Machine        `json:"machine"`
	Started   time.Time      `json:"started"`
	Seconds   float64        `json:"seconds"`
	LoadEnd   string         `json:"loadavg_end,omitempty"` // /proc/loadavg when the run ended
	Workloads []WorkloadInfo `json:"workloads"`
	Results   []Result       `json:"results"`
	Tiny      bool           `json:"tiny,omitempty"` // run at Tiny sizes, where the goals (Targets) do not apply
}

// Find returns the result of workload under mode, if the report has it.
func (r *Report) Find(workload, mode string) (Result, bool) {
	for _, res := range r.Results {
		if res.Workload == workload && res.Mode == mode {
			return res, true
		}
	}
	return Result{}, false
}

// WriteJSON writes the report as indented JSON.
func (r *Report) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}

// ReadJSON reads a report written by WriteJSON.
func ReadJSON(rd io.Reader) (*Report, error) {
	var r Report
	dec := json.NewDecoder(rd)
	dec.DisallowUnknownFields()
	if err := dec.Decode(&r); err != nil {
		return nil, fmt.Errorf("bench: reading report: %w", err)
	}
	return &r, nil
}

// columns of the results table: header and cell.
var columns = []struct {
	head string
	cell func(*Result) string
}{
	{"workload", func(r *Result) string { return r.Workload }},
	{"mode", func(r *Result) string { return r.Mode }},
	{"reqs", func(r *Result) string { return fmt.Sprint(r.Requests) }},
	{"tok/s", func(r *Result) string { return fmt.Sprintf("%.0f", r.TokensPerSec) }},
	{"req/s", func(r *Result) string { return fmt.Sprintf("%.2f", r.RequestsPerSec) }},
	{"TTFT p50 ms", func(r *Result) string { return fmt.Sprintf("%.1f", r.TTFTp50) }},
	{"TTFT p99 ms", func(r *Result) string { return fmt.Sprintf("%.1f", r.TTFTp99) }},
	{"ITL p50 ms", func(r *Result) string { return fmt.Sprintf("%.2f", r.ITLp50) }},
	{"ITL p99 ms", func(r *Result) string { return fmt.Sprintf("%.2f", r.ITLp99) }},
	{"hit %", func(r *Result) string { return fmt.Sprintf("%.1f", 100*r.HitRate) }},
	{"prefill tok", func(r *Result) string { return fmt.Sprint(r.PrefillTokens) }},
	{"KV eff %", func(r *Result) string { return fmt.Sprintf("%.1f", 100*r.KVEfficiency) }},
	{"peak seqs", func(r *Result) string { return fmt.Sprint(r.PeakRunning) }},
	{"peak blocks", func(r *Result) string { return fmt.Sprint(r.PeakBlocks) }},
	{"slot util %", func(r *Result) string { return fmt.Sprintf("%.1f", 100*r.SlotUtil) }},
	{"loaded util %", func(r *Result) string { return fmt.Sprintf("%.1f", 100*r.SlotUtilLoaded) }},
	{"preempt", func(r *Result) string { return fmt.Sprint(r.Preemptions) }},
	{"wall s", func(r *Result) string { return fmt.Sprintf("%.2f", r.Seconds) }},
}

// WriteTable writes the results as an aligned text table.
func (r *Report) WriteTable(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	for i, c := range columns {
		if i > 0 {
			io.WriteString(tw, "\t")
		}
		io.WriteString(tw, c.head)
	}
	io.WriteString(tw, "\t\n")
	for i := range r.Results {
		for j, c := range columns {
			if j > 0 {
				io.WriteString(tw, "\t")
			}
			io.WriteString(tw, c.cell(&r.Results[i]))
		}
		io.WriteString(tw, "\t\n")
	}
	return tw.Flush()
}

// Target is one of the goals checked against a report.
type Target struct {
	Name string `json:"name"`
	Want string `json:"want"`
	Got  string `json:"got"`
	Met  bool   `json:"met"`
	// NotApplicable marks a goal measured at a size it was not set for
	// (Report.Tiny): Met means nothing then.
	NotApplicable bool `json:"not_applicable,omitempty"`
}

// Status is the target's verdict in a word: "met", "MISSED", or "n/a"
// where the goal does not apply to the run's size.
func (t Target) Status() string {
	switch {
	case t.NotApplicable:
		return "n/a"
	case t.Met:
		return "met"
	}
	return "MISSED"
}

// Targets checks the report against the benchmark goals; goals whose
// workloads the report lacks are left out. In a Tiny report every goal is
// NotApplicable: they are set for the Default sizes.
func (r *Report) Targets() []Target {
	out := r.targets()
	for i := range out {
		out[i].NotApplicable = r.Tiny
	}
	return out
}

// goal is a Target judged at the size its goal was set for.
func goal(name, want, got string, met bool) Target {
	return Target{Name: name, Want: want, Got: got, Met: met}
}

// targets measures the goals, applicable or not.
func (r *Report) targets() []Target {
	var out []Target
	ratio := func(a, b float64) float64 {
		if b == 0 {
			return 0
		}
		return a / b
	}
	for _, width := range []int{32, 8} { // 8: the tiny suite
		cont, ok1 := r.Find(SkewSeed, skewMode(0, width))
		stat, ok2 := r.Find(SkewSeed, skewMode(1, width))
		if !ok1 || !ok2 {
			continue
		}
		x := ratio(cont.TokensPerSec, stat.TokensPerSec)
		out = append(out,
			goal(fmt.Sprintf("skew (seed lengths), width %d: continuous vs static tokens/s", width), ">= 1.8x",
				fmt.Sprintf("%.2fx (%.0f vs %.0f)", x, cont.TokensPerSec, stat.TokensPerSec), x >= 1.8),
			goal(fmt.Sprintf("skew (seed lengths), width %d: continuous slot utilisation", width), ">= 95%",
				fmt.Sprintf("%.1f%% over the run, %.1f%% while requests waited (static %.1f%%, %.1f%%)",
					100*cont.SlotUtil, 100*cont.SlotUtilLoaded, 100*stat.SlotUtil, 100*stat.SlotUtilLoaded), cont.SlotUtil >= 0.95))
		break
	}
	if pg, ok := r.Find(KVName, ModePaged); ok {
		if ct, ok := r.Find(KVName, ModeContiguous); ok {
			x := ratio(float64(pg.PeakRunning), float64(ct.PeakRunning))
			out = append(out,
				goal("kv-alloc: paged KV memory efficiency", ">= 95%",
					fmt.Sprintf("%.1f%% (contiguous %.1f%%)", 100*pg.KVEfficiency, 100*ct.KVEfficiency), pg.KVEfficiency >= 0.95),
				goal("kv-alloc: concurrent sequences, paged vs contiguous, same pool", ">= 3x",
					fmt.Sprintf("%.2fx (%d vs %d)", x, pg.PeakRunning, ct.PeakRunning), x >= 3))
		}
	}
	if on, ok := r.Find(SharedBurst, ModeCacheOn); ok {
		if off, ok := r.Find(SharedBurst, ModeCacheOff); ok {
			x := ratio(on.TokensPerSec, off.TokensPerSec)
			out = append(out, goal("shared-prefix-burst (90% shared, at saturation): cache on vs off tokens/s", ">= 4x",
				fmt.Sprintf("%.2fx (%.0f vs %.0f)", x, on.TokensPerSec, off.TokensPerSec), x >= 4))
		}
	}
	if on, ok := r.Find(SharedPref, ModeCacheOn); ok {
		if off, ok := r.Find(SharedPref, ModeCacheOff); ok {
			x := ratio(on.TokensPerSec, off.TokensPerSec)
			y := ratio(off.TTFTp50, on.TTFTp50)
			out = append(out,
				goal("shared-prefix (90% shared, open loop): cache on vs off tokens/s", ">= 4x",
					fmt.Sprintf("%.2fx (%.0f vs %.0f)", x, on.TokensPerSec, off.TokensPerSec), x >= 4),
				goal("shared-prefix (90% shared, open loop): cache off vs on TTFT p50", ">= 8x lower",
					fmt.Sprintf("%.2fx (%.1f ms vs %.1f ms)", y, on.TTFTp50, off.TTFTp50), y >= 8))
		}
	}
	return out
}

// Markdown markers: WriteMarkdownFile replaces what lies between them.
const (
	MarkBegin = "<!-- bench:begin (generated by prefixd bench --markdown; edits here are overwritten) -->"
	MarkEnd   = "<!-- bench:end -->"
)

// Markdown returns the generated part of BENCHMARKS.md: machine, command,
// targets, the table and the plots (paths relative to the markdown file).
func (r *Report) Markdown(plots []string) string {
	var b strings.Builder
	m := r.Machine
	fmt.Fprintf(&b, "Measured %s on %s (%d CPUs, %s/%s, %s; load average %s at the start, %s at the end), model `%s`, seed %d, in %.0f s:\n\n",
		r.Started.UTC().Format("2006-01-02 15:04 MST"), m.CPU, m.NProc, m.GOOS, m.GOARCH, m.GoVersion, m.LoadAvg, r.LoadEnd, r.Model, r.Seed, r.Seconds)
	fmt.Fprintf(&b, "    %s\n\n", r.Command)
	if ts := r.Targets(); len(ts) > 0 {
		b.WriteString("### Targets\n\n| goal | target | measured | met |\n|---|---|---|---|\n")
		for _, t := range ts {
			met := map[string]string{"met": "yes", "MISSED": "no", "n/a": "n/a (tiny sizes)"}[t.Status()]
			fmt.Fprintf(&b, "| %s | %s | %s | %s |\n", t.Name, t.Want, t.Got, met)
		}
		b.WriteString("\n")
	}
	b.WriteString("### Workloads\n\n")
	for _, w := range r.Workloads {
		fmt.Fprintf(&b, "- `%s`: %s\n", w.Name, w.Params)
	}
	b.WriteString("\n### Results\n\n|")
	for _, c := range columns {
		fmt.Fprintf(&b, " %s |", c.head)
	}
	b.WriteString("\n|")
	for i := range columns {
		if i < 2 {
			b.WriteString("---|")
		} else {
			b.WriteString("---:|")
		}
	}
	b.WriteString("\n")
	for i := range r.Results {
		b.WriteString("|")
		for _, c := range columns {
			fmt.Fprintf(&b, " %s |", c.cell(&r.Results[i]))
		}
		b.WriteString("\n")
	}
	if len(plots) > 0 {
		b.WriteString("\n")
		for _, p := range plots {
			fmt.Fprintf(&b, "![%s](%s)\n", strings.TrimSuffix(p[strings.LastIndex(p, "/")+1:], ".png"), p)
		}
	}
	return b.String()
}

// SpliceMarkdown returns doc with the text between MarkBegin and MarkEnd
// replaced by generated; a doc without the markers gets them appended.
func SpliceMarkdown(doc, generated string) string {
	block := MarkBegin + "\n" + generated + MarkEnd + "\n"
	i := strings.Index(doc, MarkBegin)
	j := strings.Index(doc, MarkEnd)
	if i < 0 || j < i {
		if doc != "" && !strings.HasSuffix(doc, "\n") {
			doc += "\n"
		}
		return doc + block
	}
	rest := doc[j+len(MarkEnd):]
	rest = strings.TrimPrefix(rest, "\n")
	var b bytes.Buffer
	b.WriteString(doc[:i])
	b.WriteString(block)
	b.WriteString(rest)
	return b.String()
}
