const USD = new Intl.NumberFormat('en-US', { style: 'currency', currency: 'USD', maximumFractionDigits: 4 });

/** A cost in dollars, to a hundredth of a cent: one model call costs little. */
export const usd = (amount: number) => USD.format(amount);
