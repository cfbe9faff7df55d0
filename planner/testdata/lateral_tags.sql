-- A table function over a partitioned stream, then an aggregation by the function's
-- column: the calls run in the source stage (no exchange before them), the filter on the
-- input's column is pushed below the calls, and the aggregation by tag is exchanged.
-- job: j4
SELECT t.tag, window_start, window_end, COUNT(*) AS n
FROM TUMBLE(orders_keyed, ts, INTERVAL '10' SECOND) AS o
CROSS JOIN LATERAL string_to_table(o.user_id, '-') AS t(tag)
WHERE o.amount > 10 AND t.tag <> ''
GROUP BY t.tag, window_start, window_end;
