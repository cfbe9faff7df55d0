// Package filter compiles and evaluates RocketMQ's SQL92 message selectors (the
// "SQL92" expression type of a subscription) over a message's properties, TAGS included.
//
//	e, err := filter.Parse("a > 5 AND b = 'x'")   // *SyntaxError names the character
//	ok := e.Match(func(name string) (string, bool) { ... })
//
// The grammar is RocketMQ's (ActiveMQ's selector grammar without LIKE, arithmetic, hex and
// octal literals): OR, AND, NOT; =, <>, >, >=, <, <=; IS [NOT] NULL; [NOT] BETWEEN x AND y;
// [NOT] IN ('s', ...); [NOT] CONTAINS / STARTSWITH / ENDSWITH 's'; unary + and -;
// parentheses; string literals in single quotes (a quote doubled inside); integer (an optional
// L suffix), decimal and exponent literals; TRUE, FALSE, NULL; identifiers
// [A-Za-z_$][A-Za-z0-9_$]*; keywords in any case; -- and /* */ comments.
//
// Evaluation follows RocketMQ's three-valued logic: a missing property is NULL, a
// comparison with NULL is NULL, AND/OR/NOT treat NULL as unknown, and a message matches
// only when the whole selector is TRUE. Property values are strings; compared with a
// number they are converted to its type (to an int for an integer literal in the int
// range, to a long beyond it, to a double for a decimal literal); a value that does not
// convert is an evaluation error, which, as in RocketMQ, makes the message not match.
// >, >=, < and <= between two strings compare them as numbers. Checks RocketMQ makes when
// compiling are made here too (a string or boolean literal beside <, NULL beside =, IN on
// something other than a property, a BETWEEN whose bounds are in the wrong order).
//
// Differences from RocketMQ: a decimal literal of 0.0 (or below 4.9E-324) is accepted
// (RocketMQ refuses it), a -- comment may end the input without a newline, and
// expressions nest at most MaxDepth deep.
//
// A compiled *Expression is immutable and safe for concurrent use.
package filter
