-- The group-by form of a hopping window.
SELECT user_id, HOP_START(ts, INTERVAL '1' MINUTE, INTERVAL '5' MINUTE) AS ws,
       HOP_END(ts, INTERVAL '1' MINUTE, INTERVAL '5' MINUTE) AS we, MAX(amount) AS biggest
FROM orders
GROUP BY user_id, HOP(ts, INTERVAL '1' MINUTE, INTERVAL '5' MINUTE);
