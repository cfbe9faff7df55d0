-- The group-by form of a session window.
SELECT user_id, SESSION_START(ts, INTERVAL '30' SECOND) AS s, SESSION_END(ts, INTERVAL '30' SECOND) AS e,
       COUNT(*) AS n, MIN(amount) AS smallest
FROM orders
GROUP BY user_id, SESSION(ts, INTERVAL '30' SECOND);
