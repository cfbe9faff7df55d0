-- Window assignment without aggregation: the predicate on amount is pushed below the window
-- assignment, the one on window_start stays above it.
SELECT order_id, window_start, window_end
FROM TUMBLE(orders, ts, INTERVAL '1' MINUTE)
WHERE window_start >= TIMESTAMP '2026-11-30 05:00:00' AND amount > 10;
