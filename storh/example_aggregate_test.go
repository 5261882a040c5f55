package storh_test

import (
	"fmt"

	"github.com/storhdb/storh-go/storh"
	"github.com/storhdb/storh-go/storh/query"
)

func ExampleDocs_Aggregate() {
	db, done := exampleDB()
	defer done()
	orders, err := db.Docs("orders", storh.WithIndex(storh.Index("status")))
	if err != nil {
		panic(err)
	}
	for _, o := range []storh.Map{
		{"status": "paid", "amount": 10, "items": []storh.Map{{"sku": "tea", "qty": 2}}},
		{"status": "paid", "amount": 2.5, "items": []storh.Map{{"sku": "scone", "qty": 1}, {"sku": "tea", "qty": 1}}},
		{"status": "open", "amount": 7},
		{"amount": 1}, // no status: the group nil
	} {
		if _, err := orders.Put(o); err != nil {
			panic(err)
		}
	}

	// Total per status; Sum is an int64 until a float is summed, and a path
	// through a list (items.qty) adds every value it reaches.
	groups, err := orders.Aggregate(query.All(), []string{"status"},
		query.Count("n"), query.Sum("total", "amount"), query.Sum("qty", "items.qty"), query.Max("largest", "amount"))
	if err != nil {
		panic(err)
	}
	for _, g := range groups {
		fmt.Println(g.Key, g.Values["n"], g.Values["total"], g.Values["qty"], g.Values["largest"])
	}

	// Counted from the index on status alone: no record is read.
	plan, err := orders.ExplainAggregate(query.All().Where(query.Field("status").In("open", "paid")), []string{"status"}, query.Count("n"))
	if err != nil {
		panic(err)
	}
	fmt.Println(plan.Indexes, plan.RecordsRead, plan.Returned)
	// Output:
	// [<nil>] 1 1 0 1
	// [open] 1 7 0 7
	// [paid] 2 12.5 4 10
	// [status] 0 2
}
