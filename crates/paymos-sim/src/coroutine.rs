//! The core's async drivers, run one I/O call at a time: the simulator's way of driving the
//! very code the Worker runs. A driver is a future over an I/O whose every call parks a
//! request here and waits; [`Coroutine::resume`] polls it until it asks for the next one (or
//! ends). The scheduler executes each request against the simulated world, with its faults,
//! at a step of its choosing, and hands what it returned back at the next resume (boxed: each
//! call's executor returns the type its I/O method declares). Dropping a coroutine between two
//! calls is a driver that crashed there.

use std::any::Any;
use std::cell::RefCell;
use std::fmt;
use std::future::{poll_fn, Future};
use std::pin::Pin;
use std::rc::Rc;
use std::task::{Context, Poll, Waker};

/// What a call returned.
pub type Returned = Box<dyn Any>;

struct Slot<Call> {
    call: Option<Call>,
    returned: Option<Returned>,
}

/// The driver's side: the I/O implementations call through it.
pub struct Port<Call>(Rc<RefCell<Slot<Call>>>);

impl<Call> Port<Call> {
    /// Asks the world for `call` and waits for what it returns.
    pub async fn call<T: 'static>(&self, call: Call) -> T {
        self.0.borrow_mut().call = Some(call);
        let returned = poll_fn(|_| match self.0.borrow_mut().returned.take() {
            Some(r) => Poll::Ready(r),
            None => Poll::Pending,
        })
        .await;
        *returned
            .downcast()
            .expect("the world returns what the call's I/O method declares")
    }
}

/// Where a resumed driver stopped.
pub enum Resumed<Call, Out> {
    /// At this I/O call, waiting for what it returns.
    Asks(Call),
    /// At its end.
    Done(Out),
}

/// A driver in progress.
pub struct Coroutine<Call, Out> {
    future: Pin<Box<dyn Future<Output = Out>>>,
    slot: Rc<RefCell<Slot<Call>>>,
}

impl<Call: 'static, Out: 'static> Coroutine<Call, Out> {
    /// `body` gets the port its I/O calls through; nothing runs until the first resume.
    pub fn new<Fut: Future<Output = Out> + 'static>(body: impl FnOnce(Port<Call>) -> Fut) -> Self {
        let slot = Rc::new(RefCell::new(Slot {
            call: None,
            returned: None,
        }));
        let future = Box::pin(body(Port(slot.clone())));
        Coroutine { future, slot }
    }

    /// Runs the driver up to its next call, handing it `returned` (what its last call
    /// returned; `None` at the first resume).
    pub fn resume(&mut self, returned: Option<Returned>) -> Resumed<Call, Out> {
        self.slot.borrow_mut().returned = returned;
        let mut cx = Context::from_waker(Waker::noop());
        match self.future.as_mut().poll(&mut cx) {
            Poll::Ready(out) => Resumed::Done(out),
            Poll::Pending => {
                let call = self.slot.borrow_mut().call.take();
                Resumed::Asks(call.expect("a driver waits on nothing but its I/O"))
            }
        }
    }
}

/// Runs a driver whose I/O executes each call at once (never makes it wait) to its end.
pub fn run_at_once<F: Future>(f: F) -> F::Output {
    let mut f = std::pin::pin!(f);
    match f.as_mut().poll(&mut Context::from_waker(Waker::noop())) {
        Poll::Ready(out) => out,
        Poll::Pending => unreachable!("an I/O that executes at once never makes its driver wait"),
    }
}

impl<Call, Out> fmt::Debug for Coroutine<Call, Out> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Coroutine")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_driver_stops_at_each_call_and_gets_what_it_returned() {
        let mut co = Coroutine::new(|port: Port<u32>| async move {
            let a: u32 = port.call(1).await;
            let b: u32 = port.call(a + 1).await;
            a + b
        });
        let Resumed::Asks(1) = co.resume(None) else {
            panic!("first call")
        };
        let Resumed::Asks(11) = co.resume(Some(Box::new(10u32))) else {
            panic!("second call")
        };
        let Resumed::Done(30) = co.resume(Some(Box::new(20u32))) else {
            panic!("the end")
        };
    }
}
