-- SELECT DISTINCT over a window's columns: per window, each row once when it closes.
-- job: j9
SELECT DISTINCT user_id, window_start, window_end FROM TUMBLE(orders_mq, ts, INTERVAL '1' MINUTE);
