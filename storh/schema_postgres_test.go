package storh_test

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/storhdb/storh-go/storh"
	"github.com/storhdb/storh-go/storh/internal/pgtest"
	"github.com/storhdb/storh-go/storh/query"
)

// A schema set through one store holds for the next write of another store
// on the same PostgreSQL schema, which had the collection in its cache
// without one; removing it there frees that store's writes again.
func TestPostgresSchemaSeenByOtherStores(t *testing.T) {
	skipOnPostgresPass(t)
	url := pgtest.URL(t)
	setter, writer := openPostgres(t, url), openPostgres(t, url)
	d, err := writer.Docs("people")
	if err != nil {
		t.Fatal(err)
	}
	for range 3 { // the writer's cache now holds the collection, schemaless
		if _, err := d.Put(storh.Map{"name": "a", "age": 1}); err != nil {
			t.Fatal(err)
		}
	}
	if err := setter.SetSchema("people", personSchema); err != nil {
		t.Fatal(err)
	}
	if _, err := d.Put(storh.Map{"name": "a", "age": -1}); !errors.Is(err, storh.ErrSchema) {
		t.Fatalf("the other store's Put after SetSchema: %v, want ErrSchema", err)
	}
	if _, err := d.PutMany([]any{storh.Map{"name": "a", "age": 1}, storh.Map{"age": 2}}); !errors.Is(err, storh.ErrSchema) {
		t.Fatalf("the other store's PutMany after SetSchema: %v, want ErrSchema", err)
	}
	if _, err := d.Put(storh.Map{"name": "a", "age": 1}); err != nil {
		t.Fatal(err)
	}
	if err := setter.SetSchema("people", []byte(`{"required":["name"]}`)); err != nil {
		t.Fatal(err)
	}
	if _, err := d.Put(storh.Map{"name": "a", "age": -1}); err != nil {
		t.Fatalf("the other store's Put after a looser schema: %v", err)
	}
	if _, err := d.Put(storh.Map{"age": 1}); !errors.Is(err, storh.ErrSchema) {
		t.Fatalf("the other store's Put missing the new schema's field: %v, want ErrSchema", err)
	}
	if err := setter.SetSchema("people", nil); err != nil {
		t.Fatal(err)
	}
	if _, err := d.Put(storh.Map{"age": 1}); err != nil {
		t.Fatalf("the other store's Put after the schema was removed: %v", err)
	}
	if got, err := writer.Schema("people"); err != nil || got != nil {
		t.Fatalf("the other store's Schema = %s, %v", got, err)
	}
}

// Writers in another store of this process and in another OS process put
// records the new schema refuses, without pause, while this store empties
// the collection and sets the schema until SetSchema finds it empty. No
// write in flight then may commit unchecked: once SetSchema has returned
// the collection stays empty, and every put after it fails with ErrSchema.
// The collection starts without a schema, or with one the records pass,
// which the writers validate them against before their transactions.
func TestPostgresSchemaRacesWriters(t *testing.T) {
	skipOnPostgresPass(t)
	skipUnderInvariants(t)
	for _, from := range []struct {
		name string
		opts []storh.CollectionOption
	}{
		{"none", nil},
		{"passing", []storh.CollectionOption{storh.WithSchema([]byte(`{"type": "object"}`))}},
	} {
		t.Run("from="+from.name, func(t *testing.T) { schemaRacesWriters(t, from.opts) })
	}
}

func schemaRacesWriters(t *testing.T, opts []storh.CollectionOption) {
	url := pgtest.URL(t)
	setter, writer := openPostgres(t, url), openPostgres(t, url)
	sd, err := setter.Docs("people", opts...)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sd.Put(storh.Map{"name": "seed", "age": -1}); err != nil {
		t.Fatal(err)
	}
	child := startSchemaChild(t, url)

	var set atomic.Bool // SetSchema has returned
	var stop atomic.Bool
	// pause spaces the writers' puts once SetSchema has lost many races:
	// flat out, on two shared cores, they refilled the collection between
	// DeleteMatching and SetSchema's hold of it thousands of times running.
	// Paced, their puts still land beside SetSchema, but it gets through.
	var pause atomic.Int64 // a time.Duration
	var afterSet, wrongAfterSet atomic.Int64
	wd, err := writer.Docs("people")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	// A failing run stops the writers before the stores close under them.
	defer func() { stop.Store(true); wg.Wait() }()
	wg.Go(func() {
		for !stop.Load() {
			time.Sleep(time.Duration(pause.Load()))
			wasSet := set.Load()
			_, err := wd.Put(storh.Map{"name": "w", "age": -1})
			if wasSet {
				afterSet.Add(1)
				if !errors.Is(err, storh.ErrSchema) {
					wrongAfterSet.Add(1)
					t.Errorf("a put started after SetSchema returned: %v, want ErrSchema", err)
				}
			} else if err != nil && !errors.Is(err, storh.ErrSchema) {
				t.Errorf("a put beside SetSchema: %v", err)
			}
		}
	})
	wg.Go(func() {
		for !stop.Load() {
			n := 20
			if p := time.Duration(pause.Load()); p > 0 {
				n = 1
				time.Sleep(p)
			}
			wasSet := set.Load()
			stored, refused, err := child.put(n)
			if err != nil {
				t.Error(err)
				return
			}
			if wasSet && (stored != 0 || refused != n) {
				t.Errorf("the child's puts after SetSchema returned: %d stored, %d refused; want 0, %d", stored, refused, n)
			}
		}
	})

	attempts := 0
	const maxAttempts = 1000
	for ; attempts < maxAttempts; attempts++ {
		if attempts > 0 && attempts%50 == 0 {
			pause.Store(int64(min(max(2*time.Duration(pause.Load()), 100*time.Microsecond), 20*time.Millisecond)))
		}
		if _, err := sd.DeleteMatching(query.All()); err != nil {
			t.Fatal(err)
		}
		err := setter.SetSchema("people", personSchema)
		if err == nil {
			break
		}
		if !errors.Is(err, storh.ErrSchema) {
			t.Fatal(err)
		}
	}
	if attempts == maxAttempts {
		t.Fatal("SetSchema never found the collection empty")
	}
	set.Store(true)
	// Let both writers try after the schema is set before stopping them.
	for afterSet.Load() < 20 {
		if t.Failed() {
			break
		}
		if _, err := wd.Put(storh.Map{"name": "main", "age": -2}); !errors.Is(err, storh.ErrSchema) {
			t.Fatalf("a put after SetSchema: %v, want ErrSchema", err)
		}
	}
	stop.Store(true)
	wg.Wait()
	if n := mustCount(t, sd); n != 0 {
		t.Fatalf("%d records that fail the schema were stored after SetSchema found none (after %d attempts)", n, attempts+1)
	}
	if wrongAfterSet.Load() != 0 {
		t.Fatal("puts after SetSchema were not refused")
	}
	t.Logf("SetSchema succeeded on attempt %d (writers paced %v); %d puts tried after it", attempts+1, time.Duration(pause.Load()), afterSet.Load())
}

const schemaChildEnv = "STORH_SCHEMA_CHILD"

type schemaChild struct{ c *rowsChild }

func startSchemaChild(t *testing.T, url string) schemaChild {
	t.Helper()
	cmd, in, out := startChild(t, "TestPostgresSchemaChild", schemaChildEnv+"="+url)
	c := &rowsChild{cmd: cmd, in: in, out: bufio.NewScanner(out)}
	t.Cleanup(func() {
		c.in.Close()
		c.cmd.Wait()
	})
	return schemaChild{c}
}

// put asks the child for n puts of a record personSchema refuses.
func (s schemaChild) put(n int) (stored, refused int, err error) {
	w, err := s.c.call(fmt.Sprintf("put %d", n))
	if err != nil {
		return 0, 0, err
	}
	if len(w) != 2 {
		return 0, 0, fmt.Errorf("child: answer %q", w)
	}
	stored, _ = strconv.Atoi(w[0])
	refused, _ = strconv.Atoi(w[1])
	return stored, refused, nil
}

// TestPostgresSchemaChild is the other process of
// TestPostgresSchemaRacesWriters:
//
//	put <n>   n puts of {"name":"c","age":-1} into people; answers "ok <stored> <refused>"
func TestPostgresSchemaChild(t *testing.T) {
	url := os.Getenv(schemaChildEnv)
	if url == "" {
		t.Skip("run by TestPostgresSchemaRacesWriters")
	}
	db, err := storh.Open(url)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	d, err := db.Docs("people")
	if err != nil {
		t.Fatal(err)
	}
	in := bufio.NewScanner(os.Stdin)
	for in.Scan() {
		w := strings.Fields(in.Text())
		n, _ := strconv.Atoi(w[1])
		stored, refused := 0, 0
		var failure error
		for range n {
			_, err := d.Put(storh.Map{"name": "c", "age": -1})
			switch {
			case err == nil:
				stored++
			case errors.Is(err, storh.ErrSchema):
				refused++
			default:
				failure = err
			}
		}
		if failure != nil {
			fmt.Printf("err %v\n", failure)
			continue
		}
		fmt.Printf("ok %d %d\n", stored, refused)
	}
}
