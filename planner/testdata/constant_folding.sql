-- Constant subexpressions are folded before planning; a conjunct that folds to TRUE vanishes.
SELECT order_id, amount FROM orders WHERE amount > 2 * 50 AND 1 = 1;
