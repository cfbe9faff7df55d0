-- A session window needs an aggregation: the planner says so (SQLSTATE 0A000).
SELECT user_id, window_start FROM SESSION(orders, ts, INTERVAL '30' SECOND);
