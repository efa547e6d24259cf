// Package bound holds the stated upper bounds that jepsen-lite judges
// against: for a limit mode, the most calls the third-party API may see in
// any window of a given length.
//
// # Model
//
// A Bound pairs a function Max(W) with the text of its formula. The README
// of permitd states, for every limit mode, the exact formula; the runner
// builds the matching Bound (with a constructor below or its own function)
// and hands the same value to the fake API's live monitor and to the window
// checker, so both judge the formula the README states and report its text.
//
// Windows are closed: a window of length W starting at s contains the calls
// received at times t with s <= t <= s+W. With strict spacing I (calls at
// 0, I, 2I, ...), a closed window of length W holds floor(W/I)+1 calls, which
// is what Strict returns.
//
// All arithmetic is in integers (nanoseconds and call counts); products are
// computed in 128 bits so no input overflows silently. A value that does
// not fit in an int64 saturates at math.MaxInt64: the bound can only get
// looser that way, never tighter, and checkers report the value they used.
package bound
