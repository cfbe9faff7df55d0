-- ORDER BY, LIMIT and OFFSET over a bounded input (a file): sorted when it ends.
SELECT user_id, amount FROM orders WHERE amount > 10 ORDER BY amount DESC, user_id LIMIT 5 OFFSET 2;
