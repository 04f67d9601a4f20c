//go:build unix

package report

import (
	"bytes"
	"context"
	"image"
	"image/png"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/net/html"
)

// The HTML page in a real browser: Debian's chromium, headless. The test
// takes a screenshot and checks that the first timeline is visible in it
// (its two lanes of coloured markers across the page), and dumps the DOM
// after rendering to check the timeline elements are there.
//
// Without chromium on PATH the test is skipped; scripts/install-chromium.sh
// installs it (Debian, root or sudo).

const (
	chromiumWidth, chromiumHeight = 1400, 2000
	// The timeline's marker colours (html.tmpl: --tool, --other).
	toolMarkerRGB  = 0xd9480f
	otherMarkerRGB = 0x1971c2
)

func chromiumOrSkip(t *testing.T) string {
	t.Helper()
	bin, err := exec.LookPath("chromium")
	if err != nil {
		t.Skip("chromium is not on PATH: run scripts/install-chromium.sh (installs Debian's chromium package; needs root or sudo) to run this test")
	}
	return bin
}

// runChromium runs headless chromium with its own profile and returns its
// standard output. The browser is killed, with every process it started,
// when the timeout passes.
func runChromium(t *testing.T, bin string, args ...string) []byte {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	profile := t.TempDir()
	all := append([]string{
		"--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
		"--user-data-dir=" + profile,
		"--no-first-run", "--no-default-browser-check", "--disable-dev-shm-usage",
		"--disable-extensions", "--disable-background-networking", "--disable-component-update", "--disable-sync",
		// Pixels as CSS says: no scaling, no colour management.
		"--force-device-scale-factor=1", "--force-color-profile=srgb",
	}, args...)
	cmd := exec.CommandContext(ctx, bin, all...)
	cmd.Env = append(os.Environ(), "DBUS_SESSION_BUS_ADDRESS=disabled:", "HOME="+profile)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 10 * time.Second
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	start := time.Now()
	err := cmd.Run()
	t.Logf("chromium %s: %s", args[0], time.Since(start).Round(time.Millisecond))
	if err != nil {
		t.Fatalf("chromium %s: %v (timeout: %v)\nstderr (tail):\n%s", strings.Join(args, " "), err, ctx.Err() != nil, logTail(stderr.String(), 3000))
	}
	return stdout.Bytes()
}

func logTail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return "…" + s[len(s)-n:]
}

func writeSamplePage(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	path := filepath.Join(dir, "check.html")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := WriteHTML(f, sampleCheckReport()); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	return (&url.URL{Scheme: "file", Path: filepath.ToSlash(path)}).String()
}

func TestHTMLInChromium(t *testing.T) {
	bin := chromiumOrSkip(t)
	page := writeSamplePage(t)

	t.Run("screenshot", func(t *testing.T) {
		shot := filepath.Join(t.TempDir(), "check.png")
		runChromium(t, bin, "--screenshot="+shot, "--window-size=1400,2000", page)
		if dir := os.Getenv("TRUCE_SCREENSHOT_DIR"); dir != "" {
			// Keep it to look at.
			if data, err := os.ReadFile(shot); err == nil {
				_ = os.WriteFile(filepath.Join(dir, "check.png"), data, 0o644)
			}
		}
		f, err := os.Open(shot)
		if err != nil {
			t.Fatalf("no screenshot: %v", err)
		}
		defer f.Close()
		img, err := png.Decode(f)
		if err != nil {
			t.Fatal(err)
		}
		if b := img.Bounds(); b.Dx() != chromiumWidth || b.Dy() != chromiumHeight {
			t.Fatalf("screenshot is %dx%d, want %dx%d", b.Dx(), b.Dy(), chromiumWidth, chromiumHeight)
		}
		for _, c := range []struct {
			name string
			rgb  uint32
			// The first timeline has 16 markers of each colour: a row of
			// pixels through a lane crosses at least 12 of them, spread
			// over half the page.
			minPixels, minRuns int
		}{
			{"tool markers (#d9480f)", toolMarkerRGB, 1500, 12},
			{"other writer markers (#1971c2)", otherMarkerRGB, 1500, 12},
		} {
			pixels, row, runs, span := colourStats(img, c.rgb)
			t.Logf("%s: %d pixels; best row y=%d crosses %d runs of it over %d px", c.name, pixels, row, runs, span)
			if pixels < c.minPixels {
				t.Errorf("%s: %d pixels in the screenshot, want at least %d", c.name, pixels, c.minPixels)
			}
			if runs < c.minRuns || span < chromiumWidth/2 {
				t.Errorf("%s: no lane of markers across the page (best row: %d runs over %d px)", c.name, runs, span)
			}
		}
	})

	t.Run("dump-dom", func(t *testing.T) {
		dom := runChromium(t, bin, "--dump-dom", page)
		doc, err := html.Parse(bytes.NewReader(dom))
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range []struct {
			id          string
			tool, other int
		}{{"timeline-1", 16, 16}, {"timeline-4", 2, 2}, {"timeline-5", 6, 6}} {
			tl := hxByID(t, doc, c.id)
			if !hxHasClass(tl, "timeline") {
				t.Errorf("%s lacks class timeline", c.id)
			}
			tool := hxAll(tl, hxClasses("write", "tool"))
			other := hxAll(tl, hxClasses("write", "other"))
			if len(tool) != c.tool || len(other) != c.other {
				t.Errorf("%s after rendering: %d tool and %d other markers, want %d and %d", c.id, len(tool), len(other), c.tool, c.other)
			}
		}
	})
}

// colourStats counts the pixels close to rgb and finds the row of pixels
// that crosses the most separate runs of them: a lane of markers.
func colourStats(img image.Image, rgb uint32) (pixels, bestRow, bestRuns, bestSpan int) {
	want := [3]int{int(rgb >> 16 & 0xff), int(rgb >> 8 & 0xff), int(rgb & 0xff)}
	near := func(x, y int) bool {
		r, g, b, _ := img.At(x, y).RGBA()
		got := [3]int{int(r >> 8), int(g >> 8), int(b >> 8)}
		for i := range got {
			if d := got[i] - want[i]; d > 10 || d < -10 {
				return false
			}
		}
		return true
	}
	bounds := img.Bounds()
	for y := bounds.Min.Y; y < bounds.Max.Y; y++ {
		runs, first, last, in := 0, -1, -1, false
		for x := bounds.Min.X; x < bounds.Max.X; x++ {
			if near(x, y) {
				pixels++
				if !in {
					runs++
					if first < 0 {
						first = x
					}
				}
				in, last = true, x
			} else {
				in = false
			}
		}
		if runs > bestRuns {
			bestRow, bestRuns, bestSpan = y, runs, last-first
		}
	}
	return pixels, bestRow, bestRuns, bestSpan
}
