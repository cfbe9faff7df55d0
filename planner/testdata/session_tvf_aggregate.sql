-- A table-valued session window, aggregated per user.
SELECT user_id, window_start, window_end, COUNT(*) AS clicks
FROM SESSION(orders, ts, INTERVAL '30' SECOND)
GROUP BY user_id, window_start, window_end;
