package storh_test

import (
	"context"
	"errors"
	"testing"

	"github.com/storhdb/storh-go/storh"
	"github.com/storhdb/storh-go/storh/internal/pgtest"
	"github.com/storhdb/storh-go/storh/kv"
	"github.com/storhdb/storh-go/storh/postgres"
)

// closeCounter counts Close calls of the store under a DB, which the DB
// owns: it closes it once, when it closes or when OpenStore fails.
type closeCounter struct {
	kv.Store
	closes int
}

func (s *closeCounter) Close() error { s.closes++; return s.Store.Close() }

func openPostgresStore(t *testing.T) (*closeCounter, string) {
	t.Helper()
	url := pgtest.SchemaURL(t)
	store, err := postgres.Open(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	return &closeCounter{Store: store}, url
}

// OpenStore runs the engine on a store opened by hand; what it writes is
// the same store Open of the URL then reads.
func TestOpenStore(t *testing.T) {
	store, url := openPostgresStore(t)
	db, err := storh.OpenStore(store, storh.WithMaxBatch(8))
	if err != nil {
		t.Fatal(err)
	}
	docs, err := db.Docs("posts", storh.WithIndex(storh.Index("slug").Unique()))
	if err != nil {
		t.Fatal(err)
	}
	rec, err := docs.Put(storh.Map{"slug": "hello"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := docs.Put(storh.Map{"slug": "hello"}); !errors.Is(err, storh.ErrUniqueViolation) {
		t.Fatalf("a second slug hello: %v, want ErrUniqueViolation", err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	if store.closes != 1 {
		t.Fatalf("the store was closed %d times by Close, want once", store.closes)
	}

	again := openPostgres(t, url)
	docs, err = again.Docs("posts", storh.WithoutCreate())
	if err != nil {
		t.Fatal(err)
	}
	got, err := docs.Get(rec.ID)
	if err != nil || got.Data()["slug"] != "hello" {
		t.Fatalf("Get through Open of the URL = %v, %v", got, err)
	}
}

// What an open store can no longer be given fails with ErrUnsupported and
// closes the store, which the DB would have owned.
func TestOpenStoreRefusesFileOptions(t *testing.T) {
	for _, tc := range []struct {
		name string
		opt  storh.Option
	}{
		{"WithLockTimeout", storh.WithLockTimeout(1)},
		{"WithMaxSize", storh.WithMaxSize(1 << 20)},
		{"WithInitialMmapSize", storh.WithInitialMmapSize(1 << 20)},
		{"WithFileMode", storh.WithFileMode(0o644)},
		{"WithoutSync", storh.WithoutSync()},
	} {
		t.Run(tc.name, func(t *testing.T) {
			store, _ := openPostgresStore(t)
			db, err := storh.OpenStore(store, tc.opt)
			if err == nil {
				db.Close()
				t.Fatal("OpenStore succeeded")
			}
			var e *storh.Error
			if !errors.Is(err, storh.ErrUnsupported) || !errors.As(err, &e) || e.Op != "open" || e.Hint == "" {
				t.Errorf("error %#v, want an *Error of Op open with a hint, wrapping ErrUnsupported", err)
			}
			if store.closes != 1 {
				t.Errorf("the store was closed %d times, want once", store.closes)
			}
		})
	}
}

// A bad option fails OpenStore before the engine starts, and the zero
// Option, which a caller can write, changes nothing.
func TestOpenStoreOptionErrors(t *testing.T) {
	store, _ := openPostgresStore(t)
	if _, err := storh.OpenStore(store, storh.WithMaxBatch(0)); !errors.Is(err, storh.ErrInvalidOption) {
		t.Fatalf("WithMaxBatch(0): %v, want ErrInvalidOption", err)
	}
	store, _ = openPostgresStore(t)
	db, err := storh.OpenStore(store, storh.Option{})
	if err != nil {
		t.Fatalf("the zero Option: %v", err)
	}
	db.Close()
}

// storh's doc comments state the limits' values, which the engine's leaf
// package declares: the two must not drift apart.
func TestLimitsAsDocumented(t *testing.T) {
	for _, tc := range []struct {
		name      string
		got, want int
	}{
		{"MaxRecordSize", storh.MaxRecordSize, 16 << 20},
		{"MaxDepth", storh.MaxDepth, 64},
		{"MaxNameLength", storh.MaxNameLength, 200},
	} {
		if tc.got != tc.want {
			t.Errorf("%s = %d, documented as %d", tc.name, tc.got, tc.want)
		}
	}
}
