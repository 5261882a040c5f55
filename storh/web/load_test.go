package web_test

import (
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/storhdb/storh-go/storh"
	"github.com/storhdb/storh-go/storh/internal/testkit"
	"github.com/storhdb/storh-go/storh/uuidv7"
	"github.com/storhdb/storh-go/storh/web"
)

// A bounded load test on loopback: 32 clients for 10 s with STORH_LONG=1 (2 s otherwise)
// read pages by cursor, windows, queries, single records and counts while
// one writer puts records through the API. Every request must succeed;
// the latencies are reported, not asserted (this machine is shared).
func TestLoad(t *testing.T) {
	const clients = 32
	run := 10 * time.Second
	if !testkit.Long() {
		run = 2 * time.Second
	}
	f := newFixture(t, 600, 50)
	srv := httptest.NewServer(web.Handler(f.db, web.WithWrites()))
	t.Cleanup(srv.Close)
	transport := &http.Transport{MaxIdleConnsPerHost: clients + 1}
	t.Cleanup(transport.CloseIdleConnections)
	hc := &http.Client{Transport: transport, Timeout: 30 * time.Second}

	mid := f.postIDs[len(f.postIDs)/2]
	paths := []string{
		"api/collections/posts/records?limit=100",
		"api/collections/posts/records?limit=100&after=" + mid.String(),
		"api/collections/posts/records?limit=100&newest=1&before=" + mid.String(),
		fmt.Sprintf("api/collections/posts/records?from=%d&until=%d", startMs+100_000, startMs+299_000),
		"api/collections/posts/records?limit=50&order=-score&q=" + url.QueryEscape(`{"field":"kind","op":"eq","value":"post"}`),
		"api/collections/posts/records/" + mid.String(),
		"api/collections/posts/count?q=" + url.QueryEscape(`{"field":"score","op":"gte","value":5}`),
		"api/collections",
	}
	type sample struct {
		path    int
		elapsed time.Duration
	}
	var (
		mu      sync.Mutex
		samples []sample
		failed  []string
	)
	fail := func(format string, args ...any) {
		mu.Lock()
		defer mu.Unlock()
		if len(failed) < 10 {
			failed = append(failed, fmt.Sprintf(format, args...))
		}
	}
	deadline := time.Now().Add(run)
	var wg sync.WaitGroup
	for c := range clients {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(c), 1))
			var mine []sample
			for time.Now().Before(deadline) {
				i := rng.IntN(len(paths))
				start := time.Now()
				resp, err := hc.Get(srv.URL + "/" + paths[i])
				if err != nil {
					fail("GET %s: %v", paths[i], err)
					return
				}
				_, err = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if err != nil || resp.StatusCode != http.StatusOK {
					fail("GET %s: %d, %v", paths[i], resp.StatusCode, err)
					return
				}
				mine = append(mine, sample{i, time.Since(start)})
			}
			mu.Lock()
			samples = append(samples, mine...)
			mu.Unlock()
		})
	}
	puts := 0
	wg.Go(func() {
		gen := uuidv7.NewGenerator()
		for n := 0; time.Now().Before(deadline); n++ {
			id := gen.New().String()
			body := fmt.Sprintf(`{"slug":"load-%d","score":%d,"kind":"post"}`, n, n%11)
			req, _ := http.NewRequest("PUT", srv.URL+"/api/collections/posts/records/"+id, strings.NewReader(body))
			resp, err := hc.Do(req)
			if err != nil {
				fail("PUT: %v", err)
				return
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				fail("PUT %s: %d", id, resp.StatusCode)
				return
			}
			puts++
		}
	})
	wg.Wait()
	for _, f := range failed {
		t.Error(f)
	}
	if len(samples) == 0 {
		t.Fatal("no request completed")
	}
	pct := func(ds []time.Duration, p float64) time.Duration {
		return ds[min(len(ds)-1, int(float64(len(ds))*p))]
	}
	all := make([]time.Duration, len(samples))
	byPath := make([][]time.Duration, len(paths))
	for i, s := range samples {
		all[i] = s.elapsed
		byPath[s.path] = append(byPath[s.path], s.elapsed)
	}
	slices.Sort(all)
	t.Logf("%d clients, %v: %d reads (%.0f/s) and %d writes; p50 %v, p99 %v",
		clients, run, len(all), float64(len(all))/run.Seconds(), puts, pct(all, 0.50), pct(all, 0.99))
	for i, ds := range byPath {
		if len(ds) == 0 {
			continue
		}
		slices.Sort(ds)
		t.Logf("  p50 %-10v p99 %-10v %s", pct(ds, 0.50), pct(ds, 0.99), paths[i])
	}
	if n, err := f.posts.Count(); err != nil || n != 600+puts {
		t.Errorf("posts after the load: %d, %v; want %d", n, err, 600+puts)
	}
	if rep, err := f.db.Verify(func(p storh.Problem) { t.Errorf("Verify: %v", p) }); err != nil || rep.Problems != 0 {
		t.Errorf("Verify: %+v, %v", rep, err)
	}
}
