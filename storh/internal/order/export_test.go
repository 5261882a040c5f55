package order

// CompareNumbers compares two numbers by value alone (an integer and a
// float of equal value are equal, NaN below all), for the bound tests.
func CompareNumbers(a, b any) int {
	return compareNumbers(normalize(a), normalize(b))
}

// UnixToInternal is the offset of the time layout, for the key decoder.
const UnixToInternal = unixToInternal
