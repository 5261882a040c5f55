package uuidv7_test

import (
	"errors"
	"fmt"

	"github.com/storhdb/storh-go/storh/uuidv7"
)

func ExampleNew() {
	a := uuidv7.New()
	b := uuidv7.New()
	// The ids differ on every run, but their shape and order do not.
	fmt.Println(len(a.String()), a.Version(), a.IsV7())
	fmt.Println(a.Compare(b)) // a was made first
	// Output:
	// 36 7 true
	// -1
}

func ExampleNewAt() {
	// Importing a record created at 2023-11-14T22:13:20Z keeps its time.
	id, err := uuidv7.NewAt(1700000000000)
	if err != nil {
		panic(err)
	}
	fmt.Println(id.String()[:13]) // the 48-bit timestamp
	fmt.Println(id.Time())

	_, err = uuidv7.NewAt(-1)
	fmt.Println(errors.Is(err, uuidv7.ErrTimestampRange))
	// Output:
	// 018bcfe5-6800
	// 2023-11-14 22:13:20 +0000 UTC
	// true
}

func ExampleParse() {
	// The example id of RFC 9562, appendix A.6.
	id, err := uuidv7.Parse("017F22E2-79B0-7CC3-98C4-DC0C0C07398F")
	if err != nil {
		panic(err)
	}
	fmt.Println(id) // canonical form is lowercase
	fmt.Println(id.TimestampMs(), id.Time())

	_, err = uuidv7.Parse("017f22e2-79b0-4cc3-98c4-dc0c0c07398f")
	fmt.Println(errors.Is(err, uuidv7.ErrInvalid))
	fmt.Println(err)
	// Output:
	// 017f22e2-79b0-7cc3-98c4-dc0c0c07398f
	// 1645557742000 2022-02-22 19:22:22 +0000 UTC
	// true
	// uuidv7: invalid UUIDv7 "017f22e2-79b0-4cc3-98c4-dc0c0c07398f": version '4' at offset 14, want '7'
}

func ExampleParseError() {
	err := uuidv7.Validate("{017f22e2-79b0-7cc3-98c4-dc0c0c07398f}")
	var pe *uuidv7.ParseError
	if errors.As(err, &pe) {
		fmt.Println(pe.Reason, pe.Offset)
	}
	// Output:
	// length 38
}

func ExampleMinForTimestampMs() {
	// Every id minted during the millisecond 1700000000000 lies between
	// these two, so a time window is a key range.
	fmt.Println(uuidv7.MinForTimestampMs(1700000000000))
	fmt.Println(uuidv7.MaxForTimestampMs(1700000000000))

	// Out-of-range timestamps clamp: open-ended windows need no special case.
	fmt.Println(uuidv7.MinForTimestampMs(-1))
	// Output:
	// 018bcfe5-6800-7000-8000-000000000000
	// 018bcfe5-6800-7fff-bfff-ffffffffffff
	// 00000000-0000-7000-8000-000000000000
}

func ExampleNewDeterministic() {
	// Same seed, same ids, on every run: handy for golden files.
	g := uuidv7.NewDeterministic(1, 1700000000000, 1000)
	for range 3 {
		id := g.New()
		fmt.Println(id, id.Time().Format("15:04:05"))
	}
	// Output:
	// 018bcfe5-6800-72e6-b83f-4fbde91b6eb8 22:13:20
	// 018bcfe5-6be8-7373-a48e-d247dbe5882e 22:13:21
	// 018bcfe5-6fd0-7579-a834-32c1bfc52545 22:13:22
}

func ExampleNewBatch() {
	ids := make([]uuidv7.UUID, 3)
	uuidv7.NewBatch(ids) // one lock, one clock read
	fmt.Println(ids[0].Compare(ids[1]), ids[1].Compare(ids[2]))
	// Output:
	// -1 -1
}

func ExampleParseAny() {
	// A foreign key from another system may be any version of UUID.
	u, err := uuidv7.ParseAny("73ffd264-44b3-4c69-90e8-e7d1dfc035d4")
	fmt.Println(u, u.Version(), u.IsV7(), err)
	_, err = uuidv7.Parse("73ffd264-44b3-4c69-90e8-e7d1dfc035d4")
	fmt.Println(err != nil)
	// Output:
	// 73ffd264-44b3-4c69-90e8-e7d1dfc035d4 4 false <nil>
	// true
}
