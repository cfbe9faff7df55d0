-- A non-windowed GROUP BY over a file: emits changes, one split so no exchange; the
-- event-time column is pruned.
SELECT user_id, COUNT(*) AS n, SUM(amount) AS total
FROM orders
GROUP BY user_id;
