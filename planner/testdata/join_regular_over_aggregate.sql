-- A regular join over a GROUP BY (a retract input): the aggregate's change column is the
-- last column of its side, not one of the join's; the join's rows end with one change
-- column.
-- job: j29
SELECT t.user_id, t.total, u.tier
FROM (SELECT user_id, SUM(amount) AS total FROM orders_mq GROUP BY user_id) t
JOIN users u ON t.user_id = u.user_id;
