package storh_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/storhdb/storh-go/storh"
	"github.com/storhdb/storh-go/storh/internal/pgtest"
)

// docs/postgres.md ("The URL and the schema") tells users what Open does
// with the URL's search_path: the store goes in the first schema of it
// that exists, Open never creates the schema, and a search_path naming
// none that exists fails with the error the page quotes. This test holds
// the code to the page: whoever changes the behaviour changes the page.
func TestPostgresSchemaAsDocumented(t *testing.T) {
	url := pgtest.URL(t)

	_, err := storh.Open(url + "&search_path=nosuch")
	var e *storh.Error
	if !errors.As(err, &e) || e.Op != "open" || !strings.Contains(err.Error(), `no schema to keep the store in: search_path "nosuch" names none that exists`) {
		t.Fatalf("Open with a search_path naming a missing schema: %v; want the error docs/postgres.md quotes", err)
	}

	// A missing schema first in the list: the store goes to the next.
	db := openPostgres(t, url+"&search_path=nosuch,public")
	docs, err := db.Docs("posts")
	if err != nil {
		t.Fatal(err)
	}
	rec, err := docs.Put(storh.Map{"slug": "hello"})
	if err != nil {
		t.Fatal(err)
	}
	inPublic := openPostgres(t, url+"&search_path=public")
	pub, err := inPublic.Docs("posts")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := pub.Get(rec.ID); err != nil {
		t.Fatalf("the record written through search_path=nosuch,public is not in public: %v", err)
	}
}
