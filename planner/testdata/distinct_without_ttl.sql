-- SELECT DISTINCT over an unbounded stream without a window or a state TTL: refused.
SELECT DISTINCT user_id FROM orders_mq;
