//! The platform's queues as the simulator models them, one model for all four (deliveries,
//! effects, and their dead-letter queues): at least once, in no particular order, each
//! message with the attempts the platform counts and the moment it becomes visible, retried
//! as its consumer asks until `max_retries` are spent. What a send or an ack suffers is drawn
//! from the stream of the lane that sends or acks (so that one lane drawing more does not
//! shift another's schedule).

use std::ops::Deref;

use crate::rng::Rng;

/// A message and what the platform keeps about it.
#[derive(Debug, Clone)]
pub struct Msg<T> {
    pub body: T,
    /// `message.attempts`: 1 on the first delivery.
    pub attempts: u32,
    pub visible_at: i64,
}

impl<T> Msg<T> {
    /// A fresh message (its own attempts), visible at `visible_at`.
    pub fn new(body: T, visible_at: i64) -> Msg<T> {
        Msg {
            body,
            attempts: 1,
            visible_at,
        }
    }
}

impl<T> Deref for Msg<T> {
    type Target = T;

    fn deref(&self) -> &T {
        &self.body
    }
}

/// What the platform does to sends and acks while the chaos lasts: a send fails (and half the
/// time enqueues anyway: the caller cannot tell), a message is delivered twice.
#[derive(Debug, Clone, Copy)]
pub struct Platform {
    pub chaos: bool,
    pub p_send_fail: f64,
    pub p_dup: f64,
}

impl Platform {
    /// Whether a send fails (drawn from `rng` only while the chaos lasts).
    pub fn send_fails(&self, rng: &mut Rng) -> bool {
        self.chaos && rng.chance(self.p_send_fail)
    }
}

/// What a send did: whether the caller saw it fail, and whether the messages are on the
/// queue (they may be although it failed).
#[derive(Debug, Clone, Copy)]
pub struct Sent {
    pub failed: bool,
    pub enqueued: bool,
}

#[derive(Debug)]
pub struct Queue<T> {
    msgs: Vec<Msg<T>>,
    /// The consumer's `max_retries` (wrangler.toml's, or the platform's default).
    max_retries: u32,
}

impl<T: Clone> Queue<T> {
    pub fn new(max_retries: u32) -> Queue<T> {
        Queue {
            msgs: Vec::new(),
            max_retries,
        }
    }

    pub fn push(&mut self, m: Msg<T>) {
        self.msgs.push(m);
    }

    pub fn is_empty(&self) -> bool {
        self.msgs.is_empty()
    }

    pub fn len(&self) -> usize {
        self.msgs.len()
    }

    /// When each message becomes visible (the clock stops there).
    pub fn times(&self) -> impl Iterator<Item = i64> + '_ {
        self.msgs.iter().map(|m| m.visible_at)
    }

    fn visible_indices(&self, now: i64) -> Vec<usize> {
        (0..self.msgs.len())
            .filter(|i| self.msgs[*i].visible_at <= now)
            .collect()
    }

    /// How many messages a consumer could take now.
    pub fn visible(&self, now: i64) -> usize {
        self.msgs.iter().filter(|m| m.visible_at <= now).count()
    }

    /// The first visible message (a dead-letter consumer's, which goes in turn).
    pub fn take_first(&mut self, now: i64) -> Option<Msg<T>> {
        let i = self.msgs.iter().position(|m| m.visible_at <= now)?;
        Some(self.msgs.remove(i))
    }

    /// Any one visible message, not the oldest: the queue does not promise order.
    pub fn take_any(&mut self, now: i64, rng: &mut Rng) -> Msg<T> {
        let i = *rng.pick(&self.visible_indices(now));
        self.msgs.swap_remove(i)
    }

    /// `n` visible messages, drawn in any order, in the order the queue hands them over.
    pub fn take(&mut self, n: usize, now: i64, rng: &mut Rng) -> Vec<Msg<T>> {
        let mut pool = self.visible_indices(now);
        let mut taken = Vec::with_capacity(n);
        for _ in 0..n {
            let j = rng.below(pool.len() as u64) as usize;
            taken.push(pool.swap_remove(j));
        }
        let mut by_index: Vec<(usize, usize)> = taken
            .iter()
            .copied()
            .enumerate()
            .map(|(k, i)| (i, k))
            .collect();
        by_index.sort_unstable_by_key(|a| std::cmp::Reverse(a.0));
        let mut msgs: Vec<(usize, Msg<T>)> = by_index
            .into_iter()
            .map(|(i, k)| (k, self.msgs.remove(i)))
            .collect();
        msgs.sort_by_key(|(k, _)| *k);
        msgs.into_iter().map(|(_, m)| m).collect()
    }

    /// `send`/`sendBatch`: enqueued, or an error after which the messages may or may not be on
    /// the queue; at least once, a message may be delivered twice.
    pub fn send(&mut self, p: Platform, msgs: Vec<Msg<T>>, rng: &mut Rng) -> Sent {
        let failed = p.send_fails(rng);
        let enqueued = !failed || rng.chance(0.5);
        if enqueued {
            for m in msgs {
                if p.chaos && rng.chance(p.p_dup) {
                    // at least once: the platform may deliver a message twice
                    let mut copy = m.clone();
                    copy.visible_at += rng.below(20_000) as i64;
                    self.msgs.push(copy);
                }
                self.msgs.push(m);
            }
        }
        Sent { failed, enqueued }
    }

    /// `message.ack()`: done with it, though the platform may deliver it again (`true`).
    pub fn ack(&mut self, p: Platform, mut msg: Msg<T>, now: i64, rng: &mut Rng) -> bool {
        let again = p.chaos && rng.chance(p.p_dup);
        if again {
            msg.attempts += 1;
            msg.visible_at = now + rng.below(30_000) as i64;
            self.msgs.push(msg);
        }
        again
    }

    /// `message.retry({delaySeconds})`, or a consumer that died holding it: another attempt
    /// after `delay_ms`, or `Err` with the message once `max_retries` are spent (to the
    /// dead-letter queue, or dropped by a dead-letter queue's consumer).
    pub fn retry(&mut self, mut msg: Msg<T>, now: i64, delay_ms: i64) -> Result<(), Msg<T>> {
        if msg.attempts > self.max_retries {
            return Err(msg);
        }
        msg.attempts += 1;
        msg.visible_at = now + delay_ms;
        self.msgs.push(msg);
        Ok(())
    }

    /// A message whose retries are spent, on this (dead-letter) queue: its consumer runs when
    /// the platform gets to it.
    pub fn dead_letter(&mut self, body: T, now: i64, rng: &mut Rng) {
        self.msgs
            .push(Msg::new(body, now + rng.below(60_000) as i64));
    }
}
