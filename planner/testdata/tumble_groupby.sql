-- The group-by form of a tumbling window.
SELECT user_id, TUMBLE_START(ts, INTERVAL '10' SECOND) AS ws, TUMBLE_END(ts, INTERVAL '10' SECOND) AS we,
       COUNT(*) AS n
FROM orders
GROUP BY user_id, TUMBLE(ts, INTERVAL '10' SECOND);
