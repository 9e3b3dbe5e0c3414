"""Ego motion from monocular video: metric speed and acceleration, yaw rate, stationary, jolt.

``estimator.EgoMotionEstimator`` is the entry point; the stages are modules of their own:
``road_fit`` (with ``homography``), ``noise_floor``, ``static_pixels``, ``horizon``, ``series`` (with
``smoother``, ``sanity``, ``scale``), ``stationary`` and ``jolt``; every tuning constant is in
``config.EgoConfig``.

Per consecutive pair of sampled frames (``feed``):

- *background*: corners outside the detection boxes and the learnt static mask, tracked with
  pyramidal Lucas-Kanade (forward-backward checked). Their RANSAC similarity is ``last_warp``
  (full-frame pixels, for the tracker's camera-motion compensation); over the far ones (above the
  horizon band) it gives the camera's yaw, pitch and roll increments, and in turns the focal length.
- *road* (``road_fit``, run ROAD_DELAY_FRAMES late, once the static mask has seen those frames): the
  textured pixels of the road ahead (below the horizon, ``|X| < 2 h``, ``3 h < Z < 20 h``, outside boxes and static
  pixels) are aligned directly (photometric Gauss-Newton, coarse to fine, Huber weights) under the
  ground-plane homography of a planar motion: yaw ``w``, lateral ``t_x`` and forward ``t_z``
  translation in metres (``Z = f*h/(y - y_h)``, ``X = (x - c_x)*Z/f``), a vertical shift ``p``
  (pitch change) and the horizon row ``y_h``. The start comes from a grid search of ``(w, t_z)`` on
  a 1/4-scale image, so fast motion and repeated markings do not trap the fit.
- *static pixels* (``static_pixels``; timestamps, logos, dashboard, letterbox bars): corners of the
  time-averaged image that change in < 12 % of the frames in which the scene moves (a lane line sliding along itself
  looks unchanged too, but has no corners and is kept).

At the end (``series``):

- horizon: ground points move down as ``(y - y_h)^2`` and sideways as ``(x - c_x)(y - y_h)``, so
  pairs with enough translation measure ``y_h`` (the road's vanishing line, whatever the camera's
  pitch). Their weighted median (locally over +-1.5 s) is fused with the prior from camera.json /
  cars / lanes / mid-frame, and each pair's motion is re-expressed at it;
- speed and acceleration: a constant-acceleration Kalman filter + RTS smoother over the per-pair
  speeds ``t_z/dt`` (at each interval's middle, innovation-gated); yaw rate likewise from the
  far-point and road yaw;
- stationary: road and background still while something in the image moves -> speed 0 with high
  confidence; identical frames or a scene where nothing moves -> NaN with a reason;
- jolt (rad/s): magnitude of the camera's angular rates minus their 1 s running median;
- sanity: a video whose road does not fit a flat road (rotated, upside down, camera not facing the
  road), or "turning on the spot", publishes no speed and no yaw, with a reason. "Fits" is judged on
  the share of the road's change between the frames that the planar motion leaves unexplained
  *above the image noise*: a dense optical flow (DIS) on the same pixels measures that floor, so the
  block noise of heavily compressed video no longer reads as "not a flat road".

The metric scale is focal length x camera height: from camera.json they are trusted; otherwise the
assumed FOV and 1.3 m are fused with turns and with cars, and ``speed_conf`` carries what is left
of their uncertainty.
"""
