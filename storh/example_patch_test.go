package storh_test

import (
	"errors"
	"fmt"

	"github.com/storhdb/storh-go/storh"
	"github.com/storhdb/storh-go/storh/query"
)

func ExampleDocs_Patch() {
	db, done := exampleDB()
	defer done()
	orders, err := db.Docs("orders")
	if err != nil {
		panic(err)
	}
	o, err := orders.Put(storh.Map{"status": "open", "items": []string{"tea"}, "total": 4})
	if err != nil {
		panic(err)
	}

	// Changes apply in order, in one transaction, all or none.
	r, err := orders.Patch(o.ID,
		storh.Set("status", "paid"),
		storh.Set("payment.method", "card"), // the map "payment" is created
		storh.Push("items", "scone"),
		storh.Inc("total", 3),
		storh.Inc("total", 0.5)) // an integer plus a float is a float
	if err != nil {
		panic(err)
	}
	fmt.Println(r.Data())

	// A change that cannot apply changes nothing.
	_, err = orders.Patch(o.ID, storh.Set("status", "refunded"), storh.Inc("status", 1))
	fmt.Println(errors.Is(err, storh.ErrInvalidPatch))
	r, _ = orders.Get(o.ID)
	fmt.Println(r.Data()["status"])
	// Output:
	// map[items:[tea scone] payment:map[method:card] status:paid total:7.5]
	// true
	// paid
}

func ExampleDocs_PatchMatching() {
	db, done := exampleDB()
	defer done()
	tasks, err := db.Docs("tasks", storh.WithIndex(storh.Index("status")))
	if err != nil {
		panic(err)
	}
	for _, s := range []string{"open", "open", "done"} {
		if _, err := tasks.Put(storh.Map{"status": s, "tags": []string{"a"}}); err != nil {
			panic(err)
		}
	}
	// Through the index on status; the count is of the records changed.
	n, err := tasks.PatchMatching(query.All().Where(query.Field("status").Eq("open")),
		storh.AddToSet("tags", "a", "urgent"))
	if err != nil {
		panic(err)
	}
	fmt.Println(n)
	// Output:
	// 2
}
