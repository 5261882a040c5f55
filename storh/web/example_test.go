package web_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"time"

	"github.com/storhdb/storh-go/storh"
	"github.com/storhdb/storh-go/storh/query"
	"github.com/storhdb/storh-go/storh/web"
)

// An application mounts the handler under a prefix of its own server, and
// a client reads a page of records that match a condition.
func ExampleHandler() {
	dir, err := os.MkdirTemp("", "storh-web-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	db, err := storh.Open(filepath.Join(dir, "app.db"))
	if err != nil {
		log.Fatal(err)
	}
	defer db.Close()
	// Deterministic ids, so that the output below is the same every run.
	events, err := db.Log("events", storh.WithDeterministicIDs(1, 1714564800000))
	if err != nil {
		log.Fatal(err)
	}
	for i, level := range []string{"info", "error", "info", "error"} {
		if _, err := events.Put(storh.Map{"n": i, "level": level}); err != nil {
			log.Fatal(err)
		}
	}

	mux := http.NewServeMux()
	mux.Handle("/debug/storh/", http.StripPrefix("/debug/storh", web.Handler(db, web.WithToken("s3cret"))))
	srv := httptest.NewServer(mux)
	defer srv.Close()

	q := url.Values{
		"q":      {`{"field":"level","op":"eq","value":"error"}`},
		"newest": {"1"},
		"limit":  {"1"},
	}
	req, err := http.NewRequest("GET", srv.URL+"/debug/storh/api/collections/events/records?"+q.Encode(), nil)
	if err != nil {
		log.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer s3cret")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		log.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(resp.Status)
	fmt.Print(string(body))
	// Output:
	// 200 OK
	// {"records":[{"id":"018f3406-9e03-72dd-8cd8-7274d67084ca","time":"2024-05-01T12:00:00.003Z","data":{"level":"error","n":3}}],"next":"018f3406-9e03-72dd-8cd8-7274d67084ca"}
}

// Another Go program reads a store that an application serves: a page of
// the records that match a condition, newest first, and a count.
func ExampleNewClient() {
	dir, err := os.MkdirTemp("", "storh-web-client")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	db, err := storh.Open(filepath.Join(dir, "app.db"))
	if err != nil {
		log.Fatal(err)
	}
	defer db.Close()
	events, err := db.Log("events", storh.WithDeterministicIDs(1, 1714564800000))
	if err != nil {
		log.Fatal(err)
	}
	for i, level := range []string{"info", "error", "info", "error"} {
		if _, err := events.Put(storh.Map{"n": i, "level": level}); err != nil {
			log.Fatal(err)
		}
	}
	srv := httptest.NewServer(web.Handler(db, web.WithToken("s3cret")))
	defer srv.Close()

	c, err := web.NewClient(srv.URL, "s3cret")
	if err != nil {
		log.Fatal(err)
	}
	ctx := context.Background()
	cond, err := query.Parse("level=error")
	if err != nil {
		log.Fatal(err)
	}
	sel := web.Selection{Where: []query.Cond{cond}, Newest: true}
	page, err := c.Records(ctx, "events", sel, 1)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(string(page.Records[0]))
	n, err := c.Count(ctx, "events", sel, 0)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(n, "errors")
	if _, err := c.Count(ctx, "nope", web.Selection{}, 0); errors.Is(err, storh.ErrNotFound) {
		fmt.Println(err)
	}
	// Output:
	// {"id":"018f3406-9e03-72dd-8cd8-7274d67084ca","time":"2024-05-01T12:00:00.003Z","data":{"level":"error","n":3}}
	// 2 errors
	// storh: docs "nope": not found: collection "nope" does not exist
}

// A worker in another program takes jobs from a queue that an application
// serves: it claims one, and completes it by the claim's token, which acts
// only while that claim holds. A second completion by the same token,
// whose claim is over, is refused with storh.ErrNotClaimed.
func ExampleClient_Claim() {
	dir, err := os.MkdirTemp("", "storh-web-queue")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	db, err := storh.Open(filepath.Join(dir, "app.db"))
	if err != nil {
		log.Fatal(err)
	}
	defer db.Close()
	srv := httptest.NewServer(web.Handler(db, web.WithWrites()))
	defer srv.Close()

	c, err := web.NewClient(srv.URL, "")
	if err != nil {
		log.Fatal(err)
	}
	ctx := context.Background()
	if _, err := c.EnqueueMany(ctx, "emails", []any{storh.Map{"to": "ann@example.com"}}); err != nil {
		log.Fatal(err)
	}
	// Wait up to 10s on the server when no job is due.
	jobs, err := c.Claim(ctx, "emails", 1, time.Minute, 10*time.Second)
	if err != nil {
		log.Fatal(err)
	}
	job := jobs[0]
	fmt.Println(job.State, job.Data()["to"])
	done, err := c.CompleteClaim(ctx, "emails", job)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(done.State)
	if _, err := c.CompleteClaim(ctx, "emails", job); errors.Is(err, storh.ErrNotClaimed) {
		fmt.Println("refused: the claim is over")
	}
	// Output:
	// claimed ann@example.com
	// done
	// refused: the claim is over
}

// Many jobs in one transaction, all or none: a batch whose second job is
// not claimed is refused, naming that job, and completes neither; without
// it, the batch completes the first.
func ExampleClient_Batch() {
	dir, err := os.MkdirTemp("", "storh-web-batch")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	db, err := storh.Open(filepath.Join(dir, "app.db"))
	if err != nil {
		log.Fatal(err)
	}
	defer db.Close()
	srv := httptest.NewServer(web.Handler(db, web.WithWrites()))
	defer srv.Close()
	c, err := web.NewClient(srv.URL, "")
	if err != nil {
		log.Fatal(err)
	}
	ctx := context.Background()
	if _, err := c.EnqueueMany(ctx, "emails", []any{storh.Map{"to": "ann@example.com"}, storh.Map{"to": "bo@example.com"}}); err != nil {
		log.Fatal(err)
	}
	claimed, err := c.Claim(ctx, "emails", 1, time.Minute, 0)
	if err != nil {
		log.Fatal(err)
	}
	var pending storh.Job
	for j, err := range c.Jobs(ctx, "emails", storh.JobPending, false) {
		if err != nil {
			log.Fatal(err)
		}
		pending = j
	}
	_, err = c.Batch(ctx, "emails", web.JobBatch{Action: "complete", Jobs: []storh.Job{claimed[0], pending}})
	var we *web.Error
	if errors.As(err, &we) && errors.Is(err, storh.ErrNotClaimed) {
		fmt.Println("refused at job", we.Item)
	}
	jobs, err := c.Batch(ctx, "emails", web.JobBatch{Action: "complete", Jobs: claimed})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(len(jobs), jobs[0].State)
	n, err := c.Queue(ctx, "emails")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("pending", n.Pending, "done", n.Done)
	// Output:
	// refused at job 2
	// 1 done
	// pending 1 done 1
}
